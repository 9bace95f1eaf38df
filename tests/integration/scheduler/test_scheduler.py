"""The scheduler's rules, in-process with a frozen clock, on PostgreSQL and SQLite."""

from __future__ import annotations

import json
import logging
import threading
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.app import jobs
from tests.scheduling import set_watermark, task_jobs, utc
from ultimate_jobs import Scheduler, clock, faults, ops
from ultimate_jobs.models import Job, SchedulerLeader, SchedulerState
from ultimate_jobs.schedule.declarations import occurrence_ms
from ultimate_jobs.testing import force_leader

pytestmark = pytest.mark.django_db(transaction=True)

T0 = utc(2026, 6, 1, 10, 0, 30)


def minutely(declare_task, name: str = "t.minutely", **options: object):
    return declare_task(name=name, cron="* * * * *", tz="Europe/Berlin", job=jobs.noop, input={"key": "tick"},
                        **options)


def hourly(declare_task, name: str = "t.hourly", **options: object):
    return declare_task(name=name, cron="0 * * * *", tz="UTC", job=jobs.noop,
                        input=lambda at: {"key": at.strftime("%H:%M")}, **options)


def fired(name: str) -> list[str]:
    """The occurrences a task fired, as UTC HH:MM, from the job keys."""
    out = []
    for key, _ in task_jobs(name):
        ms = int(key[len(name) + 1:].split(":", 1)[0])
        out.append(datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%H:%M"))
    return out


def test_the_first_round_arms_without_firing_then_each_occurrence_fires_once(declare_task, frozen_at) -> None:
    every = minutely(declare_task)
    frozen_at(T0)
    scheduler = Scheduler(tasks=[every])
    first = scheduler.run_once()
    assert (first.leading, first.fired, first.next_due) == (True, (), utc(2026, 6, 1, 10, 1))
    assert SchedulerState.objects.get(name="t.minutely").watermark == T0
    clock.advance(30)  # 10:01:00, exactly the occurrence
    second = scheduler.run_once()
    assert [(f.task, f.occurrence) for f in second.fired] == [("t.minutely", utc(2026, 6, 1, 10, 1))]
    assert scheduler.run_once().fired == ()
    clock.advance(59)
    assert scheduler.run_once().fired == ()
    ms = occurrence_ms(utc(2026, 6, 1, 10, 1))
    assert task_jobs("t.minutely") == [(f"t.minutely:{ms}:tick", "ready")]
    job = Job.objects.get(id=second.fired[0].jobs[0])
    assert (job.name, job.payload, job.enqueued_by) == ("tests.noop", {"key": "tick"}, "task:t.minutely")


def test_the_round_waits_for_the_next_occurrence_or_the_lease_renewal(declare_task, frozen_at) -> None:
    frozen_at(T0)
    scheduler = Scheduler(tasks=[hourly(declare_task)], lease=30)
    assert 9.9 < scheduler.run_once().wait <= 10.0  # renewal every third of the lease
    clock.freeze(utc(2026, 6, 1, 10, 59, 57))
    assert 2.9 < scheduler.run_once().wait <= 3.0  # wakes at 11:00:00


def test_a_manual_run_uses_the_jobs_plain_key(declare_task, frozen_at) -> None:
    frozen_at(T0)
    every = minutely(declare_task)
    first, = every.enqueue()
    again, = every.enqueue()
    assert (first.deduped, again.deduped, again.id) == (False, True, first.id)
    assert Job.objects.get(id=first.id).idempotency_key == "tick"


@pytest.mark.parametrize(("catch_up", "max_catch_up", "expected"), [
    ("skip", 10, ["10:00"]),                    # the latest missed occurrence, once
    ("run-once", 10, ["01:00"]),                # one catch-up: the earliest of those considered
    ("run-all", 10, [f"{h:02}:00" for h in range(1, 11)]),
    ("run-all", 3, ["08:00", "09:00", "10:00"]),  # bounded: the most recent max_catch_up
    ("skip", 1, ["10:00"]),
])
def test_catch_up_after_an_outage(declare_task, frozen_at, catch_up, max_catch_up, expected) -> None:
    task = hourly(declare_task, catch_up=catch_up, max_catch_up=max_catch_up)
    set_watermark(task.name, utc(2026, 6, 1, 0, 0))  # everything was down from midnight
    frozen_at(T0)
    scheduler = Scheduler(tasks=[task])
    assert [f.occurrence.strftime("%H:%M") for f in scheduler.run_once().fired] == expected
    assert fired(task.name) == expected
    state = SchedulerState.objects.get(name=task.name)
    assert state.watermark == utc(2026, 6, 1, 10)  # past every missed occurrence, whichever fired
    assert (state.fires, state.last_occurrence) == (len(expected), utc(2026, 6, 1, int(expected[-1][:2])))
    assert scheduler.run_once().fired == ()  # run-once fired ONE catch-up, not one a round
    clock.freeze(utc(2026, 6, 1, 11, 0, 1))
    assert [f.occurrence.strftime("%H:%M") for f in scheduler.run_once().fired] == ["11:00"]
    assert fired(task.name) == [*expected, "11:00"]


def test_a_new_leader_catches_up_from_the_watermark_it_inherits(declare_task, frozen_at) -> None:
    task = hourly(declare_task, catch_up="run-all")
    frozen_at(T0)
    Scheduler(tasks=[task], holder="old").run_once()
    clock.freeze(utc(2026, 6, 1, 13, 5))  # the old leader died; its lease lapsed long ago
    report = Scheduler(tasks=[task], holder="new").run_once()
    assert [f.occurrence.strftime("%H:%M") for f in report.fired] == ["11:00", "12:00", "13:00"]


def test_a_leader_whose_lease_expired_mid_round_stops_and_the_new_leader_does_not_double_fire(
        declare_task, frozen_at, caplog) -> None:
    a, b = minutely(declare_task, "t.a"), minutely(declare_task, "t.b")
    frozen_at(T0)
    first = Scheduler(tasks=[a, b], holder="first", lease=30)
    second = Scheduler(tasks=[a, b], holder="second", lease=30)
    assert first.run_once().leading and not second.run_once().leading
    clock.freeze(utc(2026, 6, 1, 10, 1, 1))
    calls = []

    def stall() -> None:  # after t.a's commit, "first" stalls past its lease and "second" takes over
        calls.append(1)
        if len(calls) == 1:
            clock.advance(31)
            taken = second.run_once()
            assert taken.leading and [f.task for f in taken.fired] == ["t.b"]

    with caplog.at_level(logging.INFO, logger="ultimate_jobs"), faults.armed({"scheduler_after_fire": stall}):
        stalled = first.run_once()
    assert [f.task for f in stalled.fired] == ["t.a"] and not stalled.leading
    assert "jobs.scheduler.stopped-dispatching holder=first task=t.b" in caplog.text
    assert fired("t.a") == ["10:01"] and fired("t.b") == ["10:01"]  # once each, by different leaders
    assert SchedulerLeader.objects.get().holder == "second"
    assert not first.run_once().leading  # and it stays a standby while the lease is live


def test_two_schedulers_that_both_believe_they_lead_fire_each_occurrence_once(
        declare_task, frozen_at, make_worker) -> None:
    every = minutely(declare_task)
    frozen_at(T0)
    one = force_leader(Scheduler(tasks=[every], holder="one"))
    two = force_leader(Scheduler(tasks=[every], holder="two"))
    assert two.run_once().leading and one.run_once().leading  # both read the armed watermark
    clock.freeze(utc(2026, 6, 1, 10, 1, 2))
    assert len(one.run_once().fired) == 1
    make_worker(queues=["default"], burst=True).run(install_signals=False)  # the first job already finished:
    assert task_jobs("t.minutely")[0][1] == "done"  # its key is free again, only the watermark stops a refire
    assert two.run_once().fired == ()
    clock.freeze(utc(2026, 6, 1, 10, 2, 2))
    assert len(two.run_once().fired) == 1  # two re-read the watermark after losing the race
    assert one.run_once().fired == ()
    assert [state for _, state in task_jobs("t.minutely")] == ["done", "ready"]
    assert SchedulerState.objects.get(name="t.minutely").fires == 2


def test_a_paused_task_fires_nothing_and_on_resume_its_catch_up_decides(declare_task, frozen_at) -> None:
    skip = hourly(declare_task, "t.skip", catch_up="skip")
    every = hourly(declare_task, "t.all", catch_up="run-all")
    frozen_at(T0)
    scheduler = Scheduler(tasks=[skip, every])
    scheduler.run_once()  # leading, watermarks held in memory
    assert ops.pause_task(skip)["paused"] is True
    ops.pause_task("t.all")
    assert ops.paused_tasks() == ["t.all", "t.skip"]
    clock.freeze(utc(2026, 6, 1, 13, 0, 5))
    assert scheduler.run_once().fired == ()
    row = ops.task_fires(skip)[0]
    assert (row["paused"], row["next_run_at"], row["missed_since"]) == (True, None, "2026-06-01T11:00:00Z")
    ops.resume_task(skip)
    ops.resume_task(every)
    assert ops.paused_tasks() == []
    report = scheduler.run_once()
    assert [(f.task, f.occurrence.hour) for f in report.fired] == [
        ("t.all", 11), ("t.all", 12), ("t.all", 13), ("t.skip", 13)]
    row = ops.task_fires("t.skip")[0]
    assert row["fires"] == 1 and row["last_occurrence"] == "2026-06-01T13:00:00Z"
    assert row["last_fired_at"] == "2026-06-01T13:00:05Z" and row["missed_since"] is None
    assert row["next_run_at"] == "2026-06-01T14:00:00Z" and row["cron"] == "0 * * * *"


def test_pausing_before_any_scheduler_ran_still_arms_without_firing(declare_task, frozen_at) -> None:
    task = hourly(declare_task)
    frozen_at(T0)
    ops.pause_task(task)
    assert ops.task_fires(task)[0]["armed"] is False
    Scheduler(tasks=[task]).run_once()
    assert ops.task_fires(task)[0]["watermark"] == "2026-06-01T10:00:30Z"


def test_the_idle_scheduler_reads_no_task_state(declare_task, frozen_at) -> None:
    frozen_at(T0)
    scheduler = Scheduler(tasks=[hourly(declare_task, "t.one"), hourly(declare_task, "t.two")])
    scheduler.run_once()
    with CaptureQueriesContext(connection) as queries:
        for _ in range(5):
            clock.advance(10)
            assert scheduler.run_once().fired == ()
    assert not [q for q in queries.captured_queries if "schedulerstate" in q["sql"].lower()]
    # Each round sends one statement, the lease renewal (on PostgreSQL it bypasses Django's cursor).
    assert len(queries.captured_queries) == (5 if connection.vendor == "sqlite" else 0)


def test_an_input_callable_that_raises_fires_nothing_and_keeps_the_watermark(
        declare_task, frozen_at, caplog) -> None:
    broken = {"yes": True}

    def inputs(at: datetime) -> dict[str, str]:
        if broken["yes"]:
            raise RuntimeError("the report service is down")
        return {"key": "ok"}

    task = declare_task(name="t.fragile", cron="* * * * *", tz="UTC", job=jobs.noop, input=inputs)
    frozen_at(T0)
    scheduler = Scheduler(tasks=[task])
    scheduler.run_once()
    clock.advance(40)
    with caplog.at_level(logging.ERROR, logger="ultimate_jobs"):
        assert scheduler.run_once().fired == ()
    assert "jobs.scheduler.fire-failed task=t.fragile" in caplog.text
    assert SchedulerState.objects.get(name="t.fragile").watermark == T0
    backing_off = scheduler.run_once()
    assert backing_off.fired == () and backing_off.wait > 1  # sleeps out the backoff, no busy loop
    broken["yes"] = False
    scheduler._failures.clear()  # the backoff is on the monotonic clock; skip it
    assert len(scheduler.run_once().fired) == 1


@pytest.mark.postgres_only
def test_one_round_at_a_time_a_second_caller_joins_the_round_in_flight(declare_task, frozen_at) -> None:
    every = minutely(declare_task)
    frozen_at(T0)
    scheduler = Scheduler(tasks=[every])
    scheduler.run_once()
    clock.freeze(utc(2026, 6, 1, 10, 1, 1))
    inside, release = threading.Event(), threading.Event()
    answers = {}

    def hold() -> None:
        inside.set()
        release.wait(10)

    def call(who: str) -> None:
        try:
            answers[who] = scheduler.run_once()
        finally:
            connection.close()

    with faults.armed({"scheduler_after_fire": hold}):
        first = threading.Thread(target=call, args=("first",))
        first.start()
        assert inside.wait(10)
        second = threading.Thread(target=call, args=("second",))
        second.start()
        second.join(0.3)
        assert second.is_alive()  # waiting for the round in flight, not running its own
        release.set()
        first.join(10)
        second.join(10)
    assert answers["first"] is answers["second"] and len(answers["first"].fired) == 1
    assert len(task_jobs("t.minutely")) == 1


@pytest.mark.postgres_only
def test_a_process_clock_ten_minutes_off_neither_fires_early_nor_steals_a_lease(
        declare_task, monkeypatch) -> None:
    real_now = clock.now()
    soon = (real_now + timedelta(minutes=5)).astimezone(clock.now().tzinfo)
    task = declare_task(name="t.in-five", cron=f"{soon.minute} * * * *", tz="UTC", job=jobs.noop,
                        input={"key": "x"})
    holder = Scheduler(tasks=[task], holder="honest")
    assert holder.run_once().leading
    monkeypatch.setattr(clock, "now", lambda: real_now.__class__.now(real_now.tzinfo) + timedelta(minutes=10))
    skewed = Scheduler(tasks=[task], holder="ahead")
    report = skewed.run_once()
    assert not report.leading and SchedulerLeader.objects.get().holder == "honest"
    assert abs((report.now - real_now).total_seconds()) < 60  # "now" came from the database
    holder.leadership.resign()
    report = skewed.run_once()
    assert report.leading and report.fired == ()  # the occurrence is 5 minutes away on the database clock
    assert SchedulerState.objects.get(name="t.in-five").watermark < real_now + timedelta(minutes=1)
    assert task_jobs("t.in-five") == []


def test_jobs_scheduler_burst_runs_one_round_and_hands_the_lease_back(frozen_at) -> None:
    frozen_at(utc(2026, 6, 1, 12, 10))

    def burst() -> dict:  # type: ignore[type-arg]
        out = StringIO()
        call_command("jobs_scheduler", "--burst", "--json", stdout=out, verbosity=0)
        return json.loads(out.getvalue())  # type: ignore[no-any-return]

    first = burst()
    assert (first["leading"], first["fired"]) == (True, [])  # the first start arms, fires nothing
    assert SchedulerLeader.objects.get().expires_at <= clock.now()  # handed back after its one round
    clock.freeze(utc(2026, 6, 1, 12, 17, 5))
    second = burst()
    # Only the built-in task is this test's: tasks other test modules declare at import (a consumer's
    # supervisor) fire in the same round when those modules were collected first.
    retention = [f for f in second["fired"] if f["task"] == "ultimate_jobs.retention"]
    assert [f["occurrence"] for f in retention] == ["2026-06-01T12:17:00Z"]
    assert len(retention[0]["jobs"]) == 1
    with pytest.raises(CommandError):
        call_command("jobs_scheduler", "--json", verbosity=0)


@pytest.mark.postgres_only
def test_two_forced_leaders_racing_on_their_own_connections_fire_each_occurrence_once(
        declare_task, frozen_at) -> None:
    every = minutely(declare_task)
    frozen_at(T0)
    schedulers = {who: force_leader(Scheduler(tasks=[every], holder=who)) for who in ("a", "b")}
    start, end = threading.Barrier(3), threading.Barrier(3)
    fired_by: dict[str, list[datetime]] = {"a": [], "b": []}
    rounds = 12

    def race(who: str) -> None:
        try:
            for _ in range(rounds + 1):
                start.wait(10)
                fired_by[who].extend(f.occurrence for f in schedulers[who].run_once().fired)
                end.wait(10)
        finally:
            connection.close()

    threads = [threading.Thread(target=race, args=(who,)) for who in schedulers]
    for thread in threads:
        thread.start()
    for _ in range(rounds + 1):  # round 0 arms; each later round both race for one new occurrence
        start.wait(10)
        end.wait(10)
        Job.objects.update(state="done", finished_at=clock.now())  # finished: the live key dedupes nothing
        clock.advance(60)
    for thread in threads:
        thread.join(10)
    occurrences = sorted(fired_by["a"] + fired_by["b"])
    assert len(occurrences) == rounds and len(set(occurrences)) == rounds
    assert Job.objects.count() == rounds
    assert SchedulerState.objects.get(name="t.minutely").fires == rounds
