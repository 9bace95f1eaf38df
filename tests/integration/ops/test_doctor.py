"""ops.doctor: each invariant check finds the bad row a test planted; a check that did not run fails.

Every check has a test that writes the very row it exists to find and asserts the check names that
row (its id, or the task's name), so a check that silently passes everything cannot stay green; and
a test at the edges of each check (a row exactly at a limit, the id cap, a reworded detail) against
rows planted on the hour and reports known word for word.
"""

from __future__ import annotations

import importlib
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection

from tests.conftest import BACKEND
from tests.factories import JobFactory
from tests.scheduling import set_watermark, utc
from ultimate_jobs import Scheduler, ops
from ultimate_jobs.models import FleetSlot, Job, OutboxEntry, WorkerHeartbeat

pytestmark = pytest.mark.django_db(transaction=True)
# The module, not the function ops re-exports under the same name.
doctor_module = importlib.import_module("ultimate_jobs.ops.doctor")

T0 = utc(2026, 6, 1, 10, 0, 30)
AT_TEN = utc(2026, 6, 1, 10, 0, 0)  # the edge tests' clock
NAMES = ["stuck-running", "lease-columns", "live-key-unique", "attempts-in-bounds", "concurrency-slots",
         "scheduler-watermarks", "outbox-backlog", "prepared-statements", "wake"]


def checks() -> dict[str, dict]:
    return {c["name"]: c for c in ops.doctor()["checks"]}


def check(name: str) -> dict:
    return next(c for c in ops.doctor()["checks"] if c["name"] == name)


def heartbeat(worker: str, expires_at: object) -> None:
    WorkerHeartbeat.objects.create(id=worker, host="h", pid=1, started_at=AT_TEN, last_heartbeat_at=AT_TEN,
                                   expires_at=expires_at)


def doctor_exit() -> tuple[int, str]:
    out = StringIO()
    try:
        call_command("jobs", "doctor", stdout=out, stderr=StringIO())
    except SystemExit as exit_:
        return int(exit_.code or 0), out.getvalue()
    return 0, out.getvalue()


def test_a_healthy_queue_passes_every_check(frozen_at) -> None:
    frozen_at(T0)
    Scheduler().run_once()  # arms every declared task (the built-in retention task at least) at T0
    JobFactory(done=True)
    JobFactory(running=True)  # a live lease: fine
    report = ops.doctor()
    assert report["ok"] is True
    statuses = {c["name"]: c["status"] for c in report["checks"]}
    assert statuses == {"stuck-running": "ok", "lease-columns": "ok", "live-key-unique": "ok",
                        "attempts-in-bounds": "ok", "concurrency-slots": "ok", "scheduler-watermarks": "ok",
                        "outbox-backlog": "ok",
                        "prepared-statements": "ok" if BACKEND == "postgres" else "not-applicable",
                        "wake": "ok" if BACKEND == "postgres" else "not-applicable"}
    assert doctor_exit()[0] == 0


def test_a_passing_check_says_ok_and_lists_nothing(frozen_at) -> None:
    frozen_at(AT_TEN)
    report = ops.doctor()
    assert [c["name"] for c in report["checks"]] == NAMES
    assert report["checked_at"] == "2026-06-01T10:00:00Z"
    assert check("lease-columns") == {"name": "lease-columns", "status": "ok", "ok": True, "skipped": False,
                                      "detail": "ok", "ids": []}


def test_no_task_declared_makes_the_watermark_check_not_applicable_and_ok(monkeypatch, frozen_at) -> None:
    frozen_at(T0)
    monkeypatch.setattr(doctor_module, "task_fires", lambda: [])
    found = checks()["scheduler-watermarks"]
    assert (found["status"], found["ok"], found["skipped"]) == ("not-applicable", True, False)
    assert ops.doctor()["ok"] is True


def test_stuck_running_names_the_row_past_its_lease_with_no_live_worker(frozen_clock) -> None:
    stuck = JobFactory(running=True, claimed_by="gone", visible_at=frozen_clock.now() - timedelta(seconds=1))
    JobFactory(running=True, claimed_by="gone")  # its lease has 30 s left: not stuck
    found = checks()["stuck-running"]
    assert (found["status"], found["ids"]) == ("failed", [str(stuck.id)])


def test_stuck_running_spares_a_live_lease_and_a_live_worker_and_lists_oldest_first(frozen_at) -> None:
    frozen_at(AT_TEN)
    heartbeat("alive", AT_TEN + timedelta(seconds=1))
    heartbeat("expired", AT_TEN)  # its heartbeat expires this very instant: not alive
    older = JobFactory(running=True, claimed_by="expired", visible_at=AT_TEN - timedelta(seconds=20))
    newer = JobFactory(running=True, claimed_by="gone", visible_at=AT_TEN - timedelta(seconds=1))
    JobFactory(running=True, claimed_by="gone", visible_at=AT_TEN)  # the lease ends now: not past it
    JobFactory(running=True, claimed_by="alive", visible_at=AT_TEN - timedelta(minutes=5))  # its worker will rescue it
    JobFactory(state="ready", claimed_by="gone", visible_at=AT_TEN - timedelta(minutes=5))  # not running
    found = check("stuck-running")
    assert (found["status"], found["ok"], found["ids"]) == ("failed", False, [str(older.id), str(newer.id)])
    assert found["detail"] == ("2 running job(s) past their lease with no live worker; a worker's rescue hands "
                               "them back (start one), or cancel them.")


def test_a_check_lists_at_most_max_ids_rows(frozen_at) -> None:
    frozen_at(AT_TEN)
    Job.objects.bulk_create([JobFactory.build(running=True, claimed_by="gone",
                                              visible_at=AT_TEN - timedelta(seconds=n + 1))
                             for n in range(doctor_module.MAX_IDS + 1)])
    found = check("stuck-running")
    assert len(found["ids"]) == 100 and found["detail"].startswith("100 running job(s) past their lease")


def test_lease_columns_names_the_running_row_without_a_claim_token() -> None:
    unfenced = JobFactory(running=True, claim=None)
    no_owner = JobFactory(running=True, claimed_by=None)
    found = checks()["lease-columns"]
    assert sorted(found["ids"]) == sorted([str(unfenced.id), str(no_owner.id)])


def test_lease_columns_names_each_missing_column_of_running_rows_only(frozen_at) -> None:
    frozen_at(AT_TEN)
    no_expiry = JobFactory(running=True, visible_at=None)
    no_claim = JobFactory(running=True, claim=None)
    JobFactory(state="ready")  # a ready row has none of them, rightly
    found = check("lease-columns")
    assert sorted(found["ids"]) == sorted([str(no_expiry.id), str(no_claim.id)])
    assert found["detail"] == "2 running job(s) lack a claim token, owner or lease expiry."


def test_attempts_in_bounds_names_the_row_past_its_budget() -> None:
    runaway = JobFactory(dead=True, attempt=9, max_attempts=3)
    negative = JobFactory(attempt=-1)
    JobFactory(dead=True, attempt=5, max_attempts=3)  # +2 is compensation's allowance: fine
    found = checks()["attempts-in-bounds"]
    assert sorted(found["ids"]) == sorted([str(runaway.id), str(negative.id)])


def test_attempts_in_bounds_at_its_edges(frozen_at) -> None:
    frozen_at(AT_TEN)
    JobFactory(attempt=0, max_attempts=1)
    JobFactory(dead=True, attempt=5, max_attempts=3)  # max + 2: compensation's allowance
    past = JobFactory(dead=True, attempt=6, max_attempts=3)
    no_budget = JobFactory(attempt=0, max_attempts=0)
    found = check("attempts-in-bounds")
    assert sorted(found["ids"]) == sorted([str(past.id), str(no_budget.id)])
    assert found["detail"] == "2 job(s) have an attempt count outside 0..max_attempts."


def test_live_key_unique_names_both_rows_holding_one_live_key() -> None:
    # The partial unique index forbids the row this check looks for: drop it to plant one, then restore it.
    constraint = next(c for c in Job._meta.constraints if c.name == "ultimate_jobs_job_live_key")
    with connection.schema_editor() as editor:
        editor.remove_constraint(Job, constraint)
    try:
        first = JobFactory(idempotency_key="twice", tenant_id="acme")
        second = JobFactory(idempotency_key="twice", tenant_id="acme", delayed=True)
        JobFactory(idempotency_key="twice", tenant_id="globex")  # another tenant's key: fine
        JobFactory(idempotency_key="twice", tenant_id="acme", done=True)  # finished: not live
        found = checks()["live-key-unique"]
        assert found["status"] == "failed"
        assert sorted(found["ids"]) == sorted([str(first.id), str(second.id)])
    finally:
        Job.objects.all().delete()
        with connection.schema_editor() as editor:
            editor.add_constraint(Job, constraint)


def test_live_key_unique_groups_by_name_and_a_missing_tenant_too(frozen_at) -> None:
    from django.db import connection

    frozen_at(AT_TEN)
    constraint = next(c for c in Job._meta.constraints if c.name == "ultimate_jobs_job_live_key")
    with connection.schema_editor() as editor:
        editor.remove_constraint(Job, constraint)
    try:
        first = JobFactory(idempotency_key="twice", tenant_id=None)
        second = JobFactory(idempotency_key="twice", tenant_id=None, delayed=True)
        JobFactory(name="tests.other", idempotency_key="twice", tenant_id=None)  # another job's key: fine
        found = check("live-key-unique")
        assert sorted(found["ids"]) == sorted([str(first.id), str(second.id)])
        assert found["detail"] == "a live idempotency key is held by more than one job."
    finally:
        Job.objects.all().delete()
        with connection.schema_editor() as editor:
            editor.add_constraint(Job, constraint)


def test_concurrency_slots_names_the_job_holding_a_slot_it_no_longer_runs(frozen_clock) -> None:
    done = JobFactory(done=True)
    running = JobFactory(running=True)
    later = frozen_clock.now() + timedelta(minutes=1)
    FleetSlot.objects.create(concurrency_key="tenant:acme", slot=0, holder="w1", job_id=done.id, expires_at=later)
    FleetSlot.objects.create(concurrency_key="tenant:acme", slot=1, holder="w1", job_id=running.id, expires_at=later)
    found = checks()["concurrency-slots"]
    assert (found["status"], found["ids"]) == ("failed", [str(done.id)])


def test_concurrency_slots_ignores_an_expired_slot_and_says_how_many(frozen_at) -> None:
    frozen_at(AT_TEN)
    done, finished = JobFactory(done=True), JobFactory(done=True)
    FleetSlot.objects.create(concurrency_key="k", slot=0, holder="w", job_id=done.id,
                             expires_at=AT_TEN + timedelta(seconds=1))
    FleetSlot.objects.create(concurrency_key="k", slot=1, holder="w", job_id=finished.id,
                             expires_at=AT_TEN)  # expired now
    found = check("concurrency-slots")
    assert found["ids"] == [str(done.id)]
    assert found["detail"] == "1 unexpired slot(s) held for jobs that are not running."


def test_outbox_backlog_names_the_entry_staged_long_ago(frozen_clock) -> None:
    now = frozen_clock.now()

    def staged(age: float) -> OutboxEntry:
        at = now - timedelta(seconds=age)
        return OutboxEntry.objects.create(staged_at=at, run_id=Job._meta.pk.default(), name="tests.noop",
                                          queue="default", payload="{}", idempotency_key=f"k{age}",
                                          max_attempts=3, run_at=at)

    old = staged(doctor_module.OUTBOX_MAX_AGE + 60)
    staged(5)  # just staged: the relay has time
    found = checks()["outbox-backlog"]
    assert (found["status"], found["ids"]) == ("failed", [str(old.pk)])


def test_outbox_backlog_at_its_age_limit(frozen_at) -> None:
    frozen_at(AT_TEN)

    def staged(age: float, *, published: bool = False) -> OutboxEntry:
        at = AT_TEN - timedelta(seconds=age)
        return OutboxEntry.objects.create(staged_at=at, run_id=Job._meta.pk.default(), name="tests.noop",
                                          queue="default", payload="{}", idempotency_key=f"k{age}{published}",
                                          max_attempts=3, run_at=at, published_at=AT_TEN if published else None)

    late = staged(301)
    staged(300)  # exactly the limit: still within it
    staged(3600, published=True)  # published: the relay did its job
    found = check("outbox-backlog")
    assert found["ids"] == [str(late.pk)]
    assert found["detail"] == ("1 staged outbox row(s) unpublished for over 300s: is a relay (jobs_relay, or "
                               "jobs_worker's relay role) running?")


def test_scheduler_watermarks_names_the_task_whose_watermark_fell_behind(declare_task, frozen_at) -> None:
    from tests.app import jobs

    behind = declare_task(name="t.behind", cron="* * * * *", tz="UTC", job=jobs.noop, input={"key": "b"})
    current = declare_task(name="t.current", cron="* * * * *", tz="UTC", job=jobs.noop, input={"key": "c"})
    paused = declare_task(name="t.paused", cron="* * * * *", tz="UTC", job=jobs.noop, input={"key": "p"})
    frozen_at(T0)
    set_watermark(behind.name, T0 - timedelta(minutes=10))  # the 09:51 occurrence is 9.5 minutes overdue
    set_watermark(current.name, utc(2026, 6, 1, 10, 0))
    set_watermark(paused.name, T0 - timedelta(minutes=10))
    ops.pause_task(paused)  # paused on purpose: not behind
    found = checks()["scheduler-watermarks"]
    assert (found["status"], found["ids"]) == ("failed", ["t.behind"])
    assert doctor_exit()[0] == 3


def test_scheduler_watermarks_is_skipped_and_fails_while_no_scheduler_armed_a_task(declare_task, frozen_at) -> None:
    from tests.app import jobs

    every = declare_task(name="t.unarmed", cron="* * * * *", tz="UTC", job=jobs.noop, input={"key": "u"})
    frozen_at(T0)
    found = checks()["scheduler-watermarks"]
    assert found["status"] == "skipped" and found["ok"] is False and found["skipped"] is True
    assert "none armed" in found["detail"]
    assert ops.doctor()["ok"] is False
    code, out = doctor_exit()
    assert code == 3 and "skipped" in out and "UNHEALTHY" in out
    Scheduler(tasks=[every]).run_once()  # a scheduler arms it at T0: current
    assert checks()["scheduler-watermarks"]["status"] == "ok"
    assert doctor_exit()[0] == 0


def test_scheduler_watermarks_at_the_lag_limit(declare_task, frozen_at) -> None:
    from tests.app import jobs

    late = declare_task(name="t.late", cron="* * * * *", tz="UTC", job=jobs.noop, input={"key": "l"})
    edge = declare_task(name="t.edge", cron="* * * * *", tz="UTC", job=jobs.noop, input={"key": "e"})
    frozen_at(AT_TEN)
    set_watermark(late.name, utc(2026, 6, 1, 9, 56, 30))  # missed 09:57:00, 180 s ago
    set_watermark(edge.name, utc(2026, 6, 1, 9, 57))  # missed 09:58:00, exactly SCHEDULER_LAG ago
    found = check("scheduler-watermarks")
    assert (found["status"], found["ids"]) == ("failed", ["t.late"])
    assert found["detail"] == ("1 task(s) missed an occurrence more than 120s ago: is a scheduler running and "
                               "holding the leader lease?")


def test_the_watermark_check_says_why_it_did_not_judge(declare_task, frozen_at, monkeypatch) -> None:
    from tests.app import jobs

    frozen_at(AT_TEN)
    monkeypatch.setattr(doctor_module, "task_fires", lambda: [])
    assert check("scheduler-watermarks") == {"name": "scheduler-watermarks", "status": "not-applicable", "ok": True,
                                             "skipped": False, "detail": "not applicable: no scheduled task is "
                                             "declared", "ids": []}
    monkeypatch.undo()
    declare_task(name="t.unarmed", cron="* * * * *", tz="UTC", job=jobs.noop, input={"key": "u"})
    fires = len(ops.task_fires())
    found = check("scheduler-watermarks")
    assert (found["status"], found["ok"], found["skipped"], found["ids"]) == ("skipped", False, True, [])
    assert found["detail"] == (f"skipped: {fires} task(s) declared and none armed yet: no scheduler has run "
                               "(start jobs_scheduler, or jobs_worker with its scheduler role)")
    assert ops.doctor()["ok"] is False
