"""``once=True``, ``atomic=True`` and an ambiguous commit, in-process (the crash is simulated at
the fault points; tests/process repeats the crashes with real SIGKILLed workers)."""

from __future__ import annotations

import pytest

from tests.app import step_jobs
from tests.app.models import Effect
from tests.integration.steps.conftest import effect_keys
from ultimate_jobs import JobsError, faults, ops
from ultimate_jobs.outbox import Relay
from ultimate_jobs.testing import SimulatedCrash, crash_at, drain, run_job
from ultimate_jobs.testing.runner import Runner

pytestmark = pytest.mark.django_db  # the helpers run on the test's thread, inside its transaction


def crash_once_then_finish(handle, point: str, **input):
    result = handle.enqueue(**input)
    runner = Runner()
    with crash_at(*point.split("@")), pytest.raises(SimulatedCrash):
        runner.run(runner.claim(result.id))
    runner.lapse()  # the killed worker's lease runs out
    (trace,) = drain()
    return trace


def test_once_after_a_crash_between_started_and_completed_is_unknown_and_never_rerun(jobs_clock) -> None:
    trace = crash_once_then_finish(step_jobs.once_charge, "before_step_body@charge", key="k1")
    assert (trace.state, trace.error_code, trace.stop_reason) == ("dead", "X_STEP_OUTCOME_UNKNOWN", "terminal")
    assert trace.steps["charge"].status == "started"
    assert effect_keys() == []  # the crash came before the body: fn was never called, and never is

    with pytest.raises(JobsError) as err:
        ops.resolve_step(trace.id, "nope", ran=True)
    assert err.value.code == "X_STEP_NOT_FOUND"
    ops.resolve_step(trace.id, "charge", ran=True, output={"id": "ch-manual"})
    job = ops.retry_job(trace.id)
    assert (job["state"], job["attempt"]) == ("ready", 0)
    (trace,) = drain()
    assert (trace.state, trace.result) == ("done", {"id": "ch-manual"})
    assert effect_keys() == ["receipt:k1"]  # the charge was taken as done, never run


def test_once_resolved_as_not_ran_runs_on_retry(jobs_clock) -> None:
    trace = crash_once_then_finish(step_jobs.once_charge, "before_step_body@charge", key="k2")
    with pytest.raises(JobsError) as err:
        ops.resolve_step(trace.id, "receipt", ran=False)  # never ran: nothing to resolve
    assert err.value.code == "X_STEP_NOT_FOUND"
    ops.resolve_step(trace.id, "charge", ran=False)
    ops.retry_job(trace.id)
    (trace,) = drain()
    assert trace.state == "done" and effect_keys() == ["once-charge:k2", "receipt:k2"]
    assert trace.steps["charge"].executions == 1


def test_a_failed_once_step_is_unknown_too(declare) -> None:
    from ultimate_jobs import NO_TENANT

    calls = []

    @declare(idempotency_key="{k}", tenant=NO_TENANT, retry=3)
    def fails_once(ctx, *, k: str) -> None:
        def charge() -> None:
            calls.append(ctx.attempt)
            raise ConnectionError("timed out: did the charge go through?")

        ctx.step.run("charge", charge, once=True)

    trace = run_job(fails_once, k="x")
    assert (trace.state, trace.error_code, trace.attempt) == ("dead", "X_STEP_OUTCOME_UNKNOWN", 2)
    assert calls == [1]
    assert (trace.steps["charge"].status, trace.steps["charge"].executions) == ("failed", 1)


def test_retry_job_and_resolve_step_refuse_live_jobs_and_completed_steps(jobs_clock) -> None:
    live = step_jobs.plain.enqueue(key="live")
    with pytest.raises(JobsError) as err:
        ops.retry_job(live.id)
    assert err.value.code == "X_JOB_NOT_REQUEUEABLE"
    (trace,) = drain()
    with pytest.raises(JobsError) as err:
        ops.resolve_step(trace.id, "first", ran=False)
    assert err.value.code == "X_STEP_NOT_RESOLVABLE"
    step_jobs.plain.enqueue(key="live")  # a new live job takes the key (staged in the test's transaction) ...
    Relay().drain()  # ... and is published, as the relay does after a commit
    with pytest.raises(JobsError) as err:
        ops.retry_job(trace.id)
    assert err.value.code == "X_JOB_DUPLICATE"


def test_retry_from_step_forgets_that_step_and_later_ones(jobs_clock) -> None:
    trace = run_job(step_jobs.plain, key="again")
    ops.retry_job(trace.id, from_step="second")
    (trace,) = drain()
    assert effect_keys() == ["first:again", "second:again", "second:again"]


@pytest.mark.parametrize("point", ["after_step_body_before_checkpoint@write", "after_checkpoint_commit@write"])
def test_atomic_step_writes_its_rows_exactly_once_across_a_crash(point, jobs_clock) -> None:
    trace = crash_once_then_finish(step_jobs.atomic_write, point, key="a")
    assert trace.state == "done"
    assert Effect.objects.filter(key="atomic:a").count() == 1
    assert trace.steps["write"].executions == 1  # a rolled-back execution leaves no trace, not even a count


def test_a_non_atomic_step_killed_before_its_checkpoint_repeats_its_write(jobs_clock) -> None:
    trace = crash_once_then_finish(step_jobs.plain, "after_step_body_before_checkpoint@first", key="p")
    assert trace.state == "done"
    assert effect_keys("first") == ["first:p", "first:p"]  # at-least-once: why atomic=True exists


def test_an_ambiguous_commit_is_resolved_by_the_stored_checkpoint(jobs_clock) -> None:
    with faults.armed({"after_checkpoint_commit": "raise@1"}):  # FaultInjected, an OperationalError
        trace = run_job(step_jobs.plain, key="amb")
    assert (trace.state, trace.attempt) == ("done", 2)  # the attempt failed on the "dropped connection"
    from django.db import OperationalError

    assert issubclass(faults.FaultInjected, OperationalError) and trace.last_error is None  # done: no current error
    assert "FaultInjected" in ops.get_job(trace.id)["attempts"][0]["error"]
    assert effect_keys() == ["first:amb", "second:amb"]  # the retry found the checkpoint: no second run
    assert trace.steps["first"].executions == 1
