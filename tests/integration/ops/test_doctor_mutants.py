"""The doctor (``ultimate_jobs/ops/doctor.py``) at the edges of each check, against rows the test
plants and reports it knows word for word: each test kills mutants the behaviour tests in
``tests/store/test_doctor.py`` let live (a boundary moved by one, a detail reworded, the id cap)."""

from __future__ import annotations

import importlib
from datetime import timedelta

import pytest

from tests.factories import JobFactory
from tests.scheduling import set_watermark, utc
from ultimate_jobs import ops
from ultimate_jobs.models import FleetSlot, Job, OutboxEntry, WorkerHeartbeat

pytestmark = pytest.mark.django_db(transaction=True)
doctor_module = importlib.import_module("ultimate_jobs.ops.doctor")

T0 = utc(2026, 6, 1, 10, 0, 0)
NAMES = ["stuck-running", "lease-columns", "live-key-unique", "attempts-in-bounds", "concurrency-slots",
         "scheduler-watermarks", "outbox-backlog"]


def check(name: str) -> dict:
    return next(c for c in ops.doctor()["checks"] if c["name"] == name)


def heartbeat(worker: str, expires_at: object) -> None:
    WorkerHeartbeat.objects.create(id=worker, host="h", pid=1, started_at=T0, last_heartbeat_at=T0,
                                   expires_at=expires_at)


def test_a_passing_check_says_ok_and_lists_nothing(frozen_at) -> None:
    frozen_at(T0)
    report = ops.doctor()
    assert [c["name"] for c in report["checks"]] == NAMES
    assert report["checked_at"] == "2026-06-01T10:00:00Z"
    assert check("lease-columns") == {"name": "lease-columns", "status": "ok", "ok": True, "skipped": False,
                                      "detail": "ok", "ids": []}


def test_stuck_running_spares_a_live_lease_and_a_live_worker_and_lists_oldest_first(frozen_at) -> None:
    frozen_at(T0)
    heartbeat("alive", T0 + timedelta(seconds=1))
    heartbeat("expired", T0)  # its heartbeat expires this very instant: not alive
    older = JobFactory(running=True, claimed_by="expired", visible_at=T0 - timedelta(seconds=20))
    newer = JobFactory(running=True, claimed_by="gone", visible_at=T0 - timedelta(seconds=1))
    JobFactory(running=True, claimed_by="gone", visible_at=T0)  # the lease ends now: not past it
    JobFactory(running=True, claimed_by="alive", visible_at=T0 - timedelta(minutes=5))  # its worker will rescue it
    JobFactory(state="ready", claimed_by="gone", visible_at=T0 - timedelta(minutes=5))  # not running
    found = check("stuck-running")
    assert (found["status"], found["ok"], found["ids"]) == ("failed", False, [str(older.id), str(newer.id)])
    assert found["detail"] == ("2 running job(s) past their lease with no live worker; a worker's rescue hands "
                               "them back (start one), or cancel them.")


def test_a_check_lists_at_most_max_ids_rows(frozen_at) -> None:
    frozen_at(T0)
    Job.objects.bulk_create([JobFactory.build(running=True, claimed_by="gone", visible_at=T0 - timedelta(seconds=n + 1))
                             for n in range(doctor_module.MAX_IDS + 1)])
    found = check("stuck-running")
    assert len(found["ids"]) == 100 and found["detail"].startswith("100 running job(s) past their lease")


def test_lease_columns_names_each_missing_column_of_running_rows_only(frozen_at) -> None:
    frozen_at(T0)
    no_expiry = JobFactory(running=True, visible_at=None)
    no_claim = JobFactory(running=True, claim=None)
    JobFactory(state="ready")  # a ready row has none of them, rightly
    found = check("lease-columns")
    assert sorted(found["ids"]) == sorted([str(no_expiry.id), str(no_claim.id)])
    assert found["detail"] == "2 running job(s) lack a claim token, owner or lease expiry."


def test_attempts_in_bounds_at_its_edges(frozen_at) -> None:
    frozen_at(T0)
    JobFactory(attempt=0, max_attempts=1)
    JobFactory(dead=True, attempt=5, max_attempts=3)  # max + 2: compensation's allowance
    past = JobFactory(dead=True, attempt=6, max_attempts=3)
    no_budget = JobFactory(attempt=0, max_attempts=0)
    found = check("attempts-in-bounds")
    assert sorted(found["ids"]) == sorted([str(past.id), str(no_budget.id)])
    assert found["detail"] == "2 job(s) have an attempt count outside 0..max_attempts."


def test_concurrency_slots_ignores_an_expired_slot_and_says_how_many(frozen_at) -> None:
    frozen_at(T0)
    done, finished = JobFactory(done=True), JobFactory(done=True)
    FleetSlot.objects.create(concurrency_key="k", slot=0, holder="w", job_id=done.id,
                             expires_at=T0 + timedelta(seconds=1))
    FleetSlot.objects.create(concurrency_key="k", slot=1, holder="w", job_id=finished.id, expires_at=T0)  # expired now
    found = check("concurrency-slots")
    assert found["ids"] == [str(done.id)]
    assert found["detail"] == "1 unexpired slot(s) held for jobs that are not running."


def test_outbox_backlog_at_its_age_limit(frozen_at) -> None:
    frozen_at(T0)

    def staged(age: float, *, published: bool = False) -> OutboxEntry:
        at = T0 - timedelta(seconds=age)
        return OutboxEntry.objects.create(staged_at=at, run_id=Job._meta.pk.default(), name="tests.noop",
                                          queue="default", payload="{}", idempotency_key=f"k{age}{published}",
                                          max_attempts=3, run_at=at, published_at=T0 if published else None)

    late = staged(301)
    staged(300)  # exactly the limit: still within it
    staged(3600, published=True)  # published: the relay did its job
    found = check("outbox-backlog")
    assert found["ids"] == [str(late.pk)]
    assert found["detail"] == ("1 staged outbox row(s) unpublished for over 300s: is a relay (jobs_relay, or "
                               "jobs_worker's relay role) running?")


def test_scheduler_watermarks_at_the_lag_limit(declare_task, frozen_at) -> None:
    from tests.app import jobs

    late = declare_task(name="t.late", cron="* * * * *", tz="UTC", job=jobs.noop, input={"key": "l"})
    edge = declare_task(name="t.edge", cron="* * * * *", tz="UTC", job=jobs.noop, input={"key": "e"})
    frozen_at(T0)
    set_watermark(late.name, utc(2026, 6, 1, 9, 56, 30))  # missed 09:57:00, 180 s ago
    set_watermark(edge.name, utc(2026, 6, 1, 9, 57))  # missed 09:58:00, exactly SCHEDULER_LAG ago
    found = check("scheduler-watermarks")
    assert (found["status"], found["ids"]) == ("failed", ["t.late"])
    assert found["detail"] == ("1 task(s) missed an occurrence more than 120s ago: is a scheduler running and "
                               "holding the leader lease?")


def test_the_watermark_check_says_why_it_did_not_judge(declare_task, frozen_at, monkeypatch) -> None:
    from tests.app import jobs

    frozen_at(T0)
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


def test_live_key_unique_groups_by_name_and_a_missing_tenant_too(frozen_at) -> None:
    from django.db import connection

    frozen_at(T0)
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
