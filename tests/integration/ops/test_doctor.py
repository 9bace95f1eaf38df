"""ops.doctor: each invariant check finds the bad row a test planted; a check that did not run fails.

Every check has a test that writes the very row it exists to find and asserts the check names that
row (its id, or the task's name), so a check that silently passes everything cannot stay green.
"""

from __future__ import annotations

import importlib
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection

from tests.factories import JobFactory
from tests.scheduling import set_watermark, utc
from ultimate_jobs import Scheduler, ops
from ultimate_jobs.models import FleetSlot, Job, OutboxEntry

pytestmark = pytest.mark.django_db(transaction=True)
# The module, not the function ops re-exports under the same name.
doctor_module = importlib.import_module("ultimate_jobs.ops.doctor")

T0 = utc(2026, 6, 1, 10, 0, 30)


def checks() -> dict[str, dict]:
    return {c["name"]: c for c in ops.doctor()["checks"]}


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
                        "outbox-backlog": "ok"}
    assert doctor_exit()[0] == 0


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


def test_lease_columns_names_the_running_row_without_a_claim_token() -> None:
    unfenced = JobFactory(running=True, claim=None)
    no_owner = JobFactory(running=True, claimed_by=None)
    found = checks()["lease-columns"]
    assert sorted(found["ids"]) == sorted([str(unfenced.id), str(no_owner.id)])


def test_attempts_in_bounds_names_the_row_past_its_budget() -> None:
    runaway = JobFactory(dead=True, attempt=9, max_attempts=3)
    negative = JobFactory(attempt=-1)
    JobFactory(dead=True, attempt=5, max_attempts=3)  # +2 is compensation's allowance: fine
    found = checks()["attempts-in-bounds"]
    assert sorted(found["ids"]) == sorted([str(runaway.id), str(negative.id)])


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


def test_concurrency_slots_names_the_job_holding_a_slot_it_no_longer_runs(frozen_clock) -> None:
    done = JobFactory(done=True)
    running = JobFactory(running=True)
    later = frozen_clock.now() + timedelta(minutes=1)
    FleetSlot.objects.create(concurrency_key="tenant:acme", slot=0, holder="w1", job_id=done.id, expires_at=later)
    FleetSlot.objects.create(concurrency_key="tenant:acme", slot=1, holder="w1", job_id=running.id, expires_at=later)
    found = checks()["concurrency-slots"]
    assert (found["status"], found["ids"]) == ("failed", [str(done.id)])


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
