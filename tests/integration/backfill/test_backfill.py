"""``backfill()`` in process, on PostgreSQL and SQLite: keyset pages as steps, the pacer on a frozen
clock, the ledger, the checks inside the pass, and the declared-vs-swept report."""

from __future__ import annotations

import logging
import math
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from tests.app.models import Document, Post
from ultimate_jobs import NO_TENANT, Retry, backfill, ops, pending_backfills, registered_backfills
from ultimate_jobs.errors import JobsError
from ultimate_jobs.factories.backfill.status import enqueue_backfill, gate_backfill
from ultimate_jobs.models import BackfillRun, Job, JobStep
from ultimate_jobs.registry import unregister as _unregister
from ultimate_jobs.testing import run_job

pytestmark = pytest.mark.django_db(transaction=True)


def posts(n: int, **fields: Any) -> list[int]:
    Post.objects.bulk_create([Post(title=f"t{i}", **fields) for i in range(n)])
    return list(Post.objects.order_by("pk").values_list("pk", flat=True))


def slugify_rows(seen: list[tuple[int, list[int]]] | None = None) -> Callable[[Any], None]:
    def handle(batch: Any) -> None:
        if seen is not None:
            seen.append((batch.index, [p.pk for p in batch.rows]))
        Post.objects.filter(pk__in=[p.pk for p in batch.rows]).update(slug="done")
    return handle


def steps_of(run_id: Any) -> dict[str, JobStep]:
    return {s.name: s for s in JobStep.objects.filter(run_id=run_id)}


def test_a_pass_pages_by_primary_key_one_step_per_page_and_records_the_ledger(declare_backfill, jobs_clock) -> None:
    ids = posts(250)
    seen: list[tuple[int, list[int]]] = []
    sweep = declare_backfill(name="bf.pages", source=lambda ctx: Post.objects.filter(slug="").order_by("-title"),
                             handle=slugify_rows(seen), batch=100)

    trace = run_job(sweep)

    assert trace.state == "done"
    assert trace.result == {"name": "bf.pages", "batches": 3, "rows": 250, "skipped": False, "previous_run_id": None}
    # Keyset pages in primary-key order whatever the source's own ordering, each row exactly once.
    assert [index for index, _ in seen] == [0, 1, 2]
    assert [pk for _, page in seen for pk in page] == ids
    assert not Post.objects.filter(slug="").exists()
    job = ops.get_job(trace.id)
    steps = {s["name"]: s for s in job["steps"]}
    assert list(steps) == ["batch:0", "batch:1", "batch:2"]
    assert steps["batch:0"]["output"] == {"cursor": ids[99], "rows": 100}  # the cursor and a count, never rows
    assert steps["batch:2"]["output"] == {"cursor": ids[-1], "rows": 50}
    ledger = job["backfill"]
    assert (ledger["status"], ledger["rows"], ledger["batches"]) == ("completed", 250, 3)
    assert ledger["last_cursor"] == ids[-1]
    assert ledger["run_id"] == job["run_id"] and ledger["started_at"] and ledger["completed_at"]
    assert ledger["checksum"] == next(b for b in registered_backfills() if b.name == "bf.pages").checksum


def test_an_exact_multiple_of_the_batch_ends_on_an_empty_page_not_counted(declare_backfill, jobs_clock) -> None:
    posts(200)
    sweep = declare_backfill(name="bf.exact", source=lambda ctx: Post.objects.all(), handle=slugify_rows(), batch=100)
    trace = run_job(sweep)
    assert trace.result["batches"] == 2 and trace.result["rows"] == 200
    assert steps_of(trace.run_id)["batch:2"].output == {"cursor": Post.objects.order_by("pk").last().pk, "rows": 0}


def test_a_uuid_primary_key_pages_on_its_string_cursor(declare_backfill, jobs_clock) -> None:
    Document.objects.bulk_create([Document(id=uuid.uuid4()) for _ in range(25)])
    pages: list[int] = []

    def check(batch: Any) -> None:
        pages.append(len(batch.rows))
        Document.objects.filter(pk__in=[d.pk for d in batch.rows]).update(checked=True)

    trace = run_job(declare_backfill(name="bf.uuid", source=lambda ctx: Document.objects.all(), handle=check, batch=10))
    assert trace.result["rows"] == 25 and pages == [10, 10, 5]
    assert Document.objects.filter(checked=True).count() == 25
    last = str(Document.objects.order_by("pk").last().pk)
    assert ops.get_job(trace.id)["backfill"]["last_cursor"] == last


def test_the_pacer_waits_one_interval_between_batches_on_a_frozen_clock(declare_backfill, jobs_clock) -> None:
    posts(50)
    sweep = declare_backfill(name="bf.paced", source=lambda ctx: Post.objects.all(), handle=slugify_rows(), batch=10,
                             rate=4)
    before = jobs_clock.now()
    trace = run_job(sweep)
    assert trace.result["batches"] == 5
    # Five pages and a last empty one: six steps, five waits of 1/4 s (the first page waits for nothing).
    assert jobs_clock.pauses == [0.25] * 5
    assert (jobs_clock.now() - before).total_seconds() == pytest.approx(1.25)


def test_a_resumed_pass_replays_finished_pages_and_pays_no_wait_for_them(declare_backfill, jobs_clock) -> None:
    posts(45)
    calls: Counter[int] = Counter()

    def flaky(batch: Any) -> None:
        calls[batch.index] += 1
        if batch.index == 2 and batch.ctx.attempt == 1:
            raise RuntimeError("the database blinked")
        Post.objects.filter(pk__in=[p.pk for p in batch.rows]).update(slug="done")

    sweep = declare_backfill(name="bf.resume", source=lambda ctx: Post.objects.all(), handle=flaky, batch=10, rate=2,
                             retry=Retry(attempts=3, delay="1s", jitter=False))
    trace = run_job(sweep)

    assert trace.state == "done" and trace.attempt == 2
    assert trace.result["rows"] == 45 and trace.result["batches"] == 5
    assert calls == {0: 1, 1: 1, 2: 2, 3: 1, 4: 1}  # pages 0 and 1 came back from storage
    executions = {name: s.executions for name, s in steps_of(trace.run_id).items()}
    assert executions == {"batch:0": 1, "batch:1": 1, "batch:2": 2, "batch:3": 1, "batch:4": 1}
    # Attempt 1 waited before pages 1 and 2; attempt 2 re-ran page 2 first (no wait), then waited
    # before 3 and 4. The replayed pages 0 and 1 paid nothing.
    assert jobs_clock.pauses == [0.5] * 4
    row = BackfillRun.objects.get(run_id=trace.run_id)
    assert row.status == "completed" and row.rows == 45
    assert row.started_at < row.completed_at  # adopted by the retry: started when attempt 1 began


def test_a_failed_attempt_marks_the_ledger_failed_and_the_retry_adopts_the_row(declare_backfill, jobs_clock) -> None:
    posts(5)
    states: list[str] = []

    def fail_once(batch: Any) -> None:
        states.append(BackfillRun.objects.get(name="bf.adopt").status)
        if batch.ctx.attempt == 1:
            raise RuntimeError("boom")

    sweep = declare_backfill(name="bf.adopt", source=lambda ctx: Post.objects.all(), handle=fail_once,
                             retry=Retry(attempts=2, delay="1s", jitter=False))
    trace = run_job(sweep)
    assert trace.state == "done"
    assert states == ["running", "running"]  # re-opened by the retry, which cleared the failure
    (row,) = BackfillRun.objects.filter(name="bf.adopt")
    assert (row.status, row.error_code, row.last_error, row.completed_at is not None) == ("completed", None, None, True)


def test_a_second_enqueue_after_completion_is_skipped_and_force_sweeps_into_a_new_row(declare_backfill,
                                                                                    jobs_clock) -> None:
    posts(30)
    sweep = declare_backfill(name="bf.once", source=lambda ctx: Post.objects.all(), handle=slugify_rows(), batch=20)
    first = run_job(sweep)
    assert first.result["rows"] == 30

    again = run_job(sweep)
    assert again.id != first.id  # a finished job holds no key: this is a new run, and it is a no-op
    assert again.result == {"name": "bf.once", "batches": 0, "rows": 0, "skipped": True,
                            "previous_run_id": str(first.run_id)}
    assert BackfillRun.objects.filter(name="bf.once").count() == 1
    assert ops.get_job(again.id)["backfill"] is None

    forced = run_job(sweep, force=True)
    assert forced.result == {"name": "bf.once", "batches": 2, "rows": 30, "skipped": False,
                             "previous_run_id": str(first.run_id)}
    rows = list(BackfillRun.objects.filter(name="bf.once").order_by("started_at", "run_id"))
    assert [(r.run_id, r.status, r.forced) for r in rows] == [(first.run_id, "completed", False),
                                                              (forced.run_id, "completed", True)]


def test_one_live_pass_per_name(declare_backfill) -> None:
    sweep = declare_backfill(name="bf.live", source=lambda ctx: Post.objects.all(), handle=slugify_rows())
    a = sweep.enqueue()
    b = sweep.enqueue(force=True)  # force is not part of the key: the live pass is the same pass
    assert b.id == a.id and b.deduped


def test_count_disagreeing_with_source_stalls_the_pass_and_fails_the_ledger(declare_backfill, jobs_clock) -> None:
    posts(12)
    sweep = declare_backfill(name="bf.stalled", source=lambda ctx: Post.objects.filter(slug=""),
                             handle=lambda batch: None,  # changes nothing: the rows still match
                             count=lambda ctx: Post.objects.filter(slug="").count())
    trace = run_job(sweep)
    assert trace.state in ("dead", "failed") and trace.attempt == 1  # terminal: a retry cannot fix it
    job = ops.get_job(trace.id)
    assert job["error_code"] == "X_BACKFILL_STALLED" and "12 matching row(s)" in job["last_error"]
    assert job["backfill"]["status"] == "failed" and job["backfill"]["error_code"] == "X_BACKFILL_STALLED"
    assert "bf.stalled" in pending_backfills()["pending"] and _state("bf.stalled") == "failed"


@pytest.mark.parametrize("answer", [-1, math.nan, "3", None, True])
def test_a_count_that_is_not_a_whole_number_is_an_invariant_failure(declare_backfill, jobs_clock, answer) -> None:
    posts(3)
    trace = run_job(declare_backfill(name="bf.badcount", source=lambda ctx: Post.objects.all(),
                                     handle=slugify_rows(), count=lambda ctx: answer))
    assert ops.get_job(trace.id)["error_code"] == "X_INVARIANT"
    assert BackfillRun.objects.get(name="bf.badcount").status == "failed"


@pytest.mark.parametrize("options, code, needle", [
    ({"rate": 0}, "X_JOB_DECLARATION_INVALID", "rate=0"),
    ({"rate": -2}, "X_JOB_DECLARATION_INVALID", "rate=-2"),
    ({"rate": math.nan}, "X_JOB_DECLARATION_INVALID", "rate=nan"),
    ({"rate": math.inf}, "X_JOB_DECLARATION_INVALID", "rate=inf"),
    ({"rate": True}, "X_JOB_DECLARATION_INVALID", "rate=True"),
    ({"batch": 0}, "X_JOB_DECLARATION_INVALID", "batch=0"),
    ({"batch": 1.5}, "X_JOB_DECLARATION_INVALID", "batch=1.5"),
    ({"batch": 100_001}, "X_JOB_DECLARATION_INVALID", "batch=100001"),
    ({"tenant": None}, "X_JOB_TENANT_REQUIRED", "no tenant"),
    ({"requires": "0012_post_slug"}, "X_JOB_DECLARATION_INVALID", "requires="),
    ({"environments": "production"}, "X_JOB_DECLARATION_INVALID", "environments="),
    ({"environments": []}, "X_JOB_DECLARATION_INVALID", "environments="),
    ({"source": Post.objects}, "X_JOB_DECLARATION_INVALID", "source="),
    ({"count": 3}, "X_JOB_DECLARATION_INVALID", "count="),
])
def test_bad_declarations_are_refused_where_they_are_written(options, code, needle) -> None:
    declared = {"name": "bf.refused", "tenant": NO_TENANT, "source": lambda ctx: Post.objects.all(),
                "handle": lambda batch: None, **options}
    with pytest.raises(JobsError) as caught:
        backfill(**declared)
    assert caught.value.code == code and needle in caught.value.cause and caught.value.fix
    assert "bf.refused" not in [b.name for b in registered_backfills()]


def test_an_environment_not_listed_refuses_the_pass_without_a_ledger_row(declare_backfill, jobs_clock,
                                                                         settings) -> None:
    posts(3)
    sweep = declare_backfill(name="bf.prod-only", source=lambda ctx: Post.objects.all(), handle=slugify_rows(),
                             environments=["production"])
    settings.ULTIMATE_JOBS = {**settings.ULTIMATE_JOBS, "ENVIRONMENT": "staging"}
    trace = run_job(sweep)
    assert trace.attempt == 1 and ops.get_job(trace.id)["error_code"] == "X_BACKFILL_ENVIRONMENT"
    assert not BackfillRun.objects.filter(name="bf.prod-only").exists()
    assert Post.objects.filter(slug="").count() == 3
    assert _state("bf.prod-only") == "excluded"

    settings.ULTIMATE_JOBS = {**settings.ULTIMATE_JOBS, "ENVIRONMENT": "production"}
    assert run_job(sweep).result["rows"] == 3


def test_a_required_migration_that_is_not_applied_is_retried_not_swept(declare_backfill, jobs_clock) -> None:
    posts(2)
    applied = declare_backfill(name="bf.migrated", source=lambda ctx: Post.objects.all(), handle=slugify_rows(),
                               requires="testapp.0002_backfill_rows")
    assert run_job(applied).result["rows"] == 2
    missing = declare_backfill(name="bf.unmigrated", source=lambda ctx: Post.objects.all(), handle=slugify_rows(),
                               requires="testapp.0099_later", retry=Retry(attempts=2, delay="1s"))
    trace = run_job(missing)
    assert trace.attempt == 2  # retryable: the deploy may still be migrating
    assert ops.get_job(trace.id)["error_code"] == "X_BACKFILL_MIGRATION_PENDING"
    assert not BackfillRun.objects.filter(name="bf.unmigrated").exists()
    verdict = gate_backfill("bf.unmigrated")
    assert (verdict["verdict"], verdict["code"]) == ("refused", "X_BACKFILL_MIGRATION_PENDING")


@pytest.mark.parametrize("source, needle", [
    (lambda ctx: list(Post.objects.all()), "answered list"),
    (lambda ctx: Post.objects.all()[:10], "sliced"),
    (lambda ctx: Post.objects.values("id"), "values()"),
])
def test_a_source_that_is_not_a_plain_queryset_is_refused_terminally(declare_backfill, jobs_clock, source,
                                                                     needle) -> None:
    trace = run_job(declare_backfill(name="bf.badsource", source=source, handle=slugify_rows()))
    job = ops.get_job(trace.id)
    assert trace.attempt == 1 and job["error_code"] == "X_BACKFILL_SOURCE_INVALID" and needle in job["last_error"]


def test_a_declared_tenant_runs_the_pass_as_that_tenant(declare_backfill, jobs_clock) -> None:
    posts(4, org="acme")
    posts(3, org="globex")
    sweep = declare_backfill(name="bf.acme", tenant="acme", handle=slugify_rows(),
                             source=lambda ctx: Post.objects.filter(org=ctx.tenant_id))
    trace = run_job(sweep)
    assert trace.result["rows"] == 4
    assert set(Post.objects.filter(slug="done").values_list("org", flat=True)) == {"acme"}
    job = ops.get_job(trace.id)
    assert job["tenant_id"] == "acme" and job["backfill"]["tenant_id"] == "acme"


def test_pending_reports_declared_against_swept(declare_backfill, jobs_clock) -> None:
    posts(3)
    never = declare_backfill(name="bf.never", source=lambda ctx: Post.objects.all(), handle=slugify_rows())
    done = declare_backfill(name="bf.done", source=lambda ctx: Post.objects.all(), handle=slugify_rows())
    run_job(done)
    report = pending_backfills()
    assert "bf.never" in report["pending"] and "bf.done" not in report["pending"]
    assert _state("bf.never") == "pending" and _state("bf.done") == "completed"

    never.enqueue()  # queued, not yet claimed: in flight, so not an alarm
    assert _state("bf.never") == "running" and "bf.never" not in pending_backfills()["pending"]

    BackfillRun.objects.create(run_id=uuid.uuid4(), name="bf.removed-from-code", job_id=uuid.uuid4(),
                               status="completed", checksum="x", started_at=jobs_clock.now(),
                               updated_at=jobs_clock.now())
    assert pending_backfills()["orphaned"] == ["bf.removed-from-code"]


def test_a_moved_checksum_warns_and_does_not_sweep_again(declare_backfill, jobs_clock, caplog) -> None:
    posts(3)
    run_job(declare_backfill(name="bf.moved", source=lambda ctx: Post.objects.all(), handle=slugify_rows()))
    _unregister("bf.moved")
    moved = declare_backfill(name="bf.moved", source=lambda ctx: Post.objects.filter(org=""),
                             handle=lambda batch: None)
    assert next(r for r in pending_backfills()["backfills"] if r["name"] == "bf.moved")["checksum_moved"] is True
    with caplog.at_level(logging.WARNING, logger="ultimate_jobs"):
        trace = run_job(moved)
    assert trace.result["skipped"] is True
    assert "jobs.backfill.checksum-moved name=bf.moved" in caplog.text


def test_the_gate_is_a_dry_run_with_the_row_count(declare_backfill, jobs_clock) -> None:
    posts(7)
    declare_backfill(name="bf.gate", source=lambda ctx: Post.objects.filter(slug=""), handle=slugify_rows(),
                     count=lambda ctx: Post.objects.filter(slug="").count())
    verdict = gate_backfill("bf.gate")
    assert (verdict["verdict"], verdict["rows"], verdict["state"]) == ("run", 7, "pending")
    assert not Job.objects.filter(name="bf.gate").exists() and not BackfillRun.objects.exists()

    answer = enqueue_backfill("bf.gate")
    assert answer["deduped"] is False and Job.objects.get(id=answer["job_id"]).state == "ready"
    assert gate_backfill("bf.gate")["verdict"] == "running"
    assert enqueue_backfill("bf.gate")["job_id"] == answer["job_id"]

    with pytest.raises(JobsError) as caught:
        gate_backfill("bf.nope")
    assert caught.value.code == "X_BACKFILL_NOT_FOUND" and "bf.gate" in caught.value.cause


def _state(name: str) -> str:
    return next(r["state"] for r in pending_backfills()["backfills"] if r["name"] == name)


def test_manage_py_check_names_a_required_migration_that_does_not_exist(declare_backfill) -> None:
    from ultimate_jobs.checks import check_backfill_requires

    declare_backfill(name="bf.check.ok", source=lambda ctx: Post.objects.all(), handle=slugify_rows(),
                     requires="testapp.0002_backfill_rows")
    assert check_backfill_requires() == []
    declare_backfill(name="bf.check.typo", source=lambda ctx: Post.objects.all(), handle=slugify_rows(),
                     requires="testapp.0002_backfil_rows")
    (error,) = check_backfill_requires()
    assert error.id == "ultimate_jobs.E003" and "bf.check.typo" in error.msg and error.hint


def test_a_run_that_lost_its_lease_leaves_the_ledger_to_the_new_owner(declare_backfill, jobs_clock) -> None:
    posts(30)

    def lose_lease(batch: Any) -> None:
        if batch.index == 1:  # what the heartbeat does when another worker re-claimed the run
            batch.ctx.cancelled.set("X_JOB_LEASE_LOST")

    trace = run_job(declare_backfill(name="bf.lost", source=lambda ctx: Post.objects.all(), handle=lose_lease,
                                     batch=10))
    row = BackfillRun.objects.get(run_id=trace.run_id)
    assert row.status == "running" and row.error_code is None, (trace, row.status, row.error_code)


def test_ledger_errors_pass_through_the_redactor(declare_backfill, jobs_clock) -> None:
    from ultimate_jobs import Terminal

    posts(3)

    def leak(batch: Any) -> None:
        raise Terminal("upstream refused: api_key=sk_live_123")

    trace = run_job(declare_backfill(name="bf.leak", source=lambda ctx: Post.objects.all(), handle=leak))
    stored = BackfillRun.objects.get(run_id=trace.run_id).last_error
    assert "upstream refused: api_key=[redacted]" in stored and "sk_live_123" not in stored  # redacted before written
    assert "sk_live_123" not in str(ops.backfill_runs(name="bf.leak"))
    assert "sk_live_123" not in str(ops.get_job(trace.id)["backfill"])


def test_an_operator_cancel_mid_sweep_marks_the_ledger_failed(declare_backfill, jobs_clock) -> None:
    posts(30)

    def cancel_midway(batch: Any) -> None:
        if batch.index == 1:
            ops.cancel_job(batch.ctx.job_id, reason="wrong table")
            batch.ctx.cancelled.set("X_JOB_LEASE_LOST")  # what the next heartbeat tells the body

    trace = run_job(declare_backfill(name="bf.cancelled", source=lambda ctx: Post.objects.all(),
                                     handle=cancel_midway, batch=10))
    assert trace.state == "cancelled"
    row = BackfillRun.objects.get(run_id=trace.run_id)
    assert (row.status, row.error_code) == ("failed", "X_ABORTED")
    assert _state("bf.cancelled") == "failed"


@pytest.mark.parametrize("atomic, rows, batches", [
    (True, 45, 5),  # page 2's writes rolled back with it: it ran again whole, every row counted
    (False, 35, 4),  # page 2's rows left the predicate source when it failed: handled, counted by no page
], ids=["atomic", "not-atomic"])
def test_a_page_failing_after_its_writes(declare_backfill, jobs_clock, atomic, rows, batches) -> None:
    posts(45)

    def flaky(batch: Any) -> None:
        Post.objects.filter(pk__in=[p.pk for p in batch.rows]).update(slug="done")
        if batch.index == 2 and batch.ctx.attempt == 1:
            assert Post.objects.filter(slug="").count() == 15  # written (inside the page's transaction if atomic)
            raise RuntimeError("after the write, before the checkpoint")

    sweep = declare_backfill(name="bf.page-fails", source=lambda ctx: Post.objects.filter(slug=""), handle=flaky,
                             batch=10, rate=2, atomic=atomic, retry=Retry(attempts=2, delay="1s", jitter=False))
    trace = run_job(sweep)
    assert trace.state == "done" and trace.attempt == 2
    assert not Post.objects.filter(slug="").exists()  # every row handled
    assert (trace.result["rows"], trace.result["batches"]) == (rows, batches)
    assert steps_of(trace.run_id)["batch:2"].output["rows"] == 10
    assert jobs_clock.pauses == [0.5] * (batches - 1)  # paced alike (outside the transactions when atomic)
