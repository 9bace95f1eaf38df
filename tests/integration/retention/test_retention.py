"""The built-in retention purge and its hourly task, on PostgreSQL and SQLite."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.scheduling import utc
from ultimate_jobs import Scheduler, clock, ops, registered_tasks
from ultimate_jobs.ids import uuid7
from ultimate_jobs.models import Job, JobEvent, JobStep

pytestmark = pytest.mark.django_db(transaction=True)

NOW = utc(2026, 6, 1, 12, 0, 0)
DAY = timedelta(days=1)


def make(state: str, age: timedelta, run_id: object = None) -> Job:
    finished = NOW - age if state in ("done", "failed", "dead", "cancelled") else None
    return Job.objects.create(name="tests.noop", state=state, payload={"key": "k"},
                              idempotency_key=str(uuid7()), run_id=run_id or uuid7(), run_at=NOW - age,
                              created_at=NOW - age, updated_at=NOW - age, finished_at=finished)


def test_the_purge_deletes_finished_jobs_past_their_retention_in_batches(frozen_at, monkeypatch, make_worker) -> None:
    from ultimate_jobs.factories import retention

    monkeypatch.setattr(retention.finished_jobs, "batch", 2)
    frozen_at(NOW)
    old_done = [make("done", 15 * DAY) for _ in range(5)]
    kept = [make("done", 13 * DAY), make("dead", 89 * DAY), make("failed", 30 * DAY),
            make("ready", 400 * DAY), make("running", 400 * DAY)]
    old_dead = [make("dead", 91 * DAY), make("failed", 91 * DAY), make("cancelled", 91 * DAY)]
    JobStep.objects.create(run_id=old_done[0].run_id, name="s1", status="completed")
    shared = make("done", 15 * DAY)
    survivor = make("ready", DAY, run_id=shared.run_id)  # a retry of the same run is still live
    JobStep.objects.create(run_id=shared.run_id, name="s1", status="completed")

    result = retention.purge_retention.enqueue()
    make_worker(queues=["default"], burst=True).run(install_signals=False)
    job = ops.get_job(result.id)
    assert job["state"] == "done"
    assert job["result"] == {
        "name": "ultimate_jobs.purge_retention", "now": "2026-06-01T12:00:00Z",
        "targets": {"jobs": {"jobs": 9, "steps": 1, "batches": 5},  # 2+2+2+2+1: the short batch ends it
                    "events": {"events": 0, "batches": 1},
                    "webhook-deliveries": {"deliveries": 0, "receipts": 0, "batches": 2}}}
    left = set(Job.objects.exclude(id=result.id).values_list("id", flat=True))
    assert left == {j.id for j in kept} | {survivor.id}
    assert not {j.id for j in old_done + old_dead} & left
    run_id = Job.objects.get(id=result.id).run_id  # the purge's own steps: now, purge:jobs, purge:events
    assert list(JobStep.objects.exclude(run_id=run_id).values_list("run_id", flat=True)) == [shared.run_id]


def test_retention_follows_the_settings(frozen_at, settings, make_worker) -> None:
    frozen_at(NOW)
    settings.ULTIMATE_JOBS = {**settings.ULTIMATE_JOBS, "DONE_RETENTION": "1h", "DEAD_RETENTION": "2d"}
    make("done", timedelta(hours=2))
    make("dead", DAY)
    from ultimate_jobs.factories.retention import purge_retention

    purge_retention.enqueue()
    make_worker(queues=["default"], burst=True).run(install_signals=False)
    # Neither is past its retention yet; "done" is the purge run itself.
    assert sorted(Job.objects.values_list("state", flat=True)) == ["dead", "done"]
    clock.advance(2 * DAY)
    purge_retention.enqueue()  # the first run finished: its key is free
    make_worker(queues=["default"], burst=True).run(install_signals=False)
    assert list(Job.objects.values_list("state", flat=True)) == ["done"]  # the second run; the first went too


def test_the_hourly_retention_task_is_on_by_default_and_fires_the_purge(frozen_at) -> None:
    retention = next(t for t in registered_tasks() if t.name == "ultimate_jobs.retention")
    frozen_at(utc(2026, 6, 1, 12, 10))
    scheduler = Scheduler(tasks=[retention])
    scheduler.run_once()
    assert ops.next_task_run(retention, clock.now()) == utc(2026, 6, 1, 12, 17)
    clock.freeze(utc(2026, 6, 1, 12, 17, 1))
    fired, = scheduler.run_once().fired
    job = Job.objects.get(id=fired.jobs[0])
    assert (job.name, job.payload) == ("ultimate_jobs.purge_retention", {})  # the purge takes no input


def event(name: str, age: timedelta) -> JobEvent:
    return JobEvent.objects.create(name=name, payload={"n": 1}, published_at=NOW - age)


def test_the_purge_deletes_events_past_the_dead_retention_unless_an_open_wait_could_take_them(
        frozen_at, settings, make_worker) -> None:
    frozen_at(NOW)
    old = [event("invoice.paid", 91 * DAY), event("org.created", 200 * DAY)]
    young = event("invoice.paid", 89 * DAY)
    # A run still waiting for "org.replied" since before this event was published could be answered by it.
    JobStep.objects.create(run_id=uuid7(), name="reply", status="started", event="org.replied",
                           started_at=NOW - 100 * DAY, wake_at=NOW + DAY)
    awaited = event("org.replied", 95 * DAY)
    # A wait that began after the publish, or one that has completed, keeps nothing.
    JobStep.objects.create(run_id=uuid7(), name="late", status="started", event="org.created",
                           started_at=NOW - 150 * DAY, wake_at=NOW + DAY)
    JobStep.objects.create(run_id=uuid7(), name="done", status="completed", event="invoice.paid",
                           started_at=NOW - 300 * DAY)
    from ultimate_jobs.factories.retention import purge_retention

    result = purge_retention.enqueue()
    make_worker(queues=["default"], burst=True).run(install_signals=False)
    assert ops.get_job(result.id)["result"]["targets"]["events"] == {"events": 2, "batches": 1}
    assert set(JobEvent.objects.values_list("id", flat=True)) == {young.id, awaited.id}
    assert not JobEvent.objects.filter(id__in=[e.id for e in old]).exists()

    settings.ULTIMATE_JOBS = {**settings.ULTIMATE_JOBS, "DEAD_RETENTION": "30d"}
    clock.advance(DAY)
    purge_retention.enqueue()
    make_worker(queues=["default"], burst=True).run(install_signals=False)
    assert list(JobEvent.objects.values_list("id", flat=True)) == [awaited.id]  # still awaited


def test_a_drained_pass_stops_between_batches_and_resumes_at_the_next_target(frozen_at, monkeypatch) -> None:
    from ultimate_jobs.db import store_for
    from ultimate_jobs.factories import retention
    from ultimate_jobs.factories.purge import _running
    from ultimate_jobs.testing import run_job

    frozen_at(NOW)
    for _ in range(5):
        make("done", 15 * DAY)
    event("invoice.paid", 91 * DAY)
    monkeypatch.setattr(retention.finished_jobs, "batch", 2)
    store_type = type(store_for())
    original = store_type.job_purge_finished
    batches = []

    def drain_after_the_first_batch(self, **kwargs):
        batches.append(kwargs["limit"])
        answer = original(self, **kwargs)
        _running.get().set("X_DRAINING")  # the worker began to drain during the pass
        return answer

    monkeypatch.setattr(store_type, "job_purge_finished", drain_after_the_first_batch)
    trace = run_job(retention.purge_retention)
    assert batches == [2]  # one batch, then the loop saw the cancel; the next attempt never redid it
    assert trace.state == "done" and trace.attempt == 1  # the drained attempt was handed back uncounted
    assert trace.steps["purge:jobs"].output == {"jobs": 2, "steps": 0, "batches": 1}
    assert trace.steps["purge:jobs"].executions == 1
    assert trace.steps["purge:events"].output == {"events": 1, "batches": 1}
    assert Job.objects.filter(state="done").exclude(id=trace.id).count() == 3  # the next pass takes them
