"""The codes a run ends with rather than an input refusal: each raised through the worker or the
test runner, on a job the test declared, and checked against the values the test chose."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.app import jobs
from tests.error_codes import refused, row_counts
from ultimate_jobs import NO_TENANT, JobsError, Worker, ops
from ultimate_jobs.models import Job
from ultimate_jobs.testing import run_job

pytestmark = pytest.mark.django_db(transaction=True)


def test_retry_after_settles_the_row_later_under_its_own_code(frozen_clock, make_worker) -> None:
    result = jobs.retry_after.enqueue(key="coverage", seconds=7)
    make_worker(queues=["default"], burst=True).run(install_signals=False)
    row = Job.objects.get(id=result.id)
    assert (row.state, row.attempt, row.error_code) == ("delayed", 1, "X_RETRY_AFTER")
    assert row.run_at - frozen_clock.now() == timedelta(seconds=7)  # the delay the body asked for
    assert "retry requested after 7s" in row.last_error


def test_a_drained_run_sees_x_draining_and_goes_back_uncounted(declare, caplog) -> None:
    seen: list[str] = []

    @declare(idempotency_key="{k}", tenant=NO_TENANT)
    def patient(ctx, *, k: str) -> None:
        ctx.cancelled.wait(10)  # until the drain cancels it
        try:
            ctx.cancelled.check()
        except JobsError as err:
            seen.append(err.code)
            raise

    result = patient.enqueue(k="drained")
    with caplog.at_level("INFO", logger="ultimate_jobs"), Worker(queues=["default"], drain_timeout=10) as worker:
        assert [run.id for run in worker.run_once()] == [result.id]
    assert seen == ["X_DRAINING"]
    # The seeds' two lines for a drain: the signal, then each attempt it interrupted.
    assert f"jobs.worker.drain-signalled worker={worker.worker_id} in_flight=1" in caplog.text
    assert f"jobs.attempt.interrupted job_id={result.id} name={patient.name} queue=default reason=X_DRAINING" in (
        caplog.text)
    row = Job.objects.get(id=result.id)
    # Handed back: runnable again, the attempt not counted, no error recorded against the job.
    assert (row.state, row.attempt, row.error_code, row.last_error) == ("ready", 0, None, None)


def test_a_failing_on_settled_hook_is_logged_with_its_code_and_the_outcome_stands(declare, caplog) -> None:
    @declare(idempotency_key="{k}", tenant=NO_TENANT, on_settled=lambda settled: 1 / 0)
    def fine(ctx, *, k: str) -> str:
        return "the result"

    with caplog.at_level("ERROR", logger="ultimate_jobs"):
        trace = run_job(fine, k="hook")
    failures = [r.getMessage() for r in caplog.records if "jobs.on_settled.failed" in r.getMessage()]
    assert len(failures) == 1 and "code=X_JOB_ON_SETTLED_FAILED" in failures[0]
    assert "ZeroDivisionError" in failures[0]
    assert (trace.state, ops.get_job(trace.id)["result"]) == ("done", "the result")


def test_running_a_job_this_process_no_longer_declares_is_refused(declare, declared) -> None:
    @declare(idempotency_key="{k}", tenant=NO_TENANT)
    def gone(ctx, *, k: str) -> str:
        raise AssertionError("an undeclared body must never run")

    declared.forget()  # the process no longer knows the name (as after a module was removed)
    with refused("X_JOB_NOT_REGISTERED", writes=True) as caught:
        run_job(gone, k="undeclared")
    assert repr(gone.name) in caught.error.cause
    # Refused before the claim: the row is as the enqueue left it, for a process that declares it.
    row = Job.objects.get(name=gone.name)
    assert (row.state, row.attempt, row.claimed_by, row.claim) == ("ready", 0, None, None)
    assert (row.result, row.error_code, row.last_error) == (None, None, None)
    assert row_counts()["ultimate_jobs.Job"] == 1


def test_a_cancelled_runs_own_body_cannot_enqueue_publish_or_write_steps(declare, make_worker) -> None:
    import threading

    from ultimate_jobs import publish_event

    refusals: dict[str, str] = {}
    done = threading.Event()

    @declare(idempotency_key="{k}", tenant=NO_TENANT)
    def stubborn(ctx, *, k: str) -> None:
        ctx.cancelled.wait(10)  # until the operator's cancel reaches it; then it carries on regardless
        for what, write in (("enqueue", lambda: jobs.noop.enqueue(key="from-a-cancelled-body")),
                            ("publish", lambda: publish_event("cancelled.body", {"k": k}, tenant_id=None)),
                            ("step", lambda: ctx.step.run("after-cancel", lambda: "never stored"))):
            try:
                write()
            except JobsError as err:
                refusals[what] = err.code
        done.set()

    result = stubborn.enqueue(k="cancelled")
    worker = make_worker(queues=["default"])
    worker.run_once()
    ops.cancel_job(result.id)
    worker.heartbeat.beat()  # the row no longer matches: the token is set (X_JOB_LEASE_LOST)
    assert done.wait(10)
    assert refusals == {"enqueue": "X_JOB_LEASE_LOST", "publish": "X_JOB_LEASE_LOST", "step": "X_JOB_LEASE_LOST"}
    assert list(Job.objects.values_list("name", flat=True)) == [stubborn.name]  # nothing enqueued
    assert not ops.get_job(result.id)["steps"]
    from ultimate_jobs.models import JobEvent

    assert not JobEvent.objects.exists()
    # Outside a body nothing is refused: the same enqueue from this thread lands.
    assert jobs.noop.enqueue(key="from-a-cancelled-body").deduped is False
