"""``ctx.step.run``: checkpoints, replay from one read, the stored JSON form, and the step rules."""

from __future__ import annotations

import datetime as dt
import math

import pytest
from django.test import override_settings

from tests.app import step_jobs
from tests.app.models import Effect
from tests.integration.steps.conftest import effect_keys
from ultimate_jobs import NO_TENANT, Retry, Terminal, ops
from ultimate_jobs.models import JobStep
from ultimate_jobs.testing import run_job

pytestmark = pytest.mark.django_db  # the helpers run on the test's thread, inside its transaction


def test_onboarding_a_failing_third_step_retries_only_that_step(jobs_clock) -> None:
    trace = run_job(step_jobs.onboard, org="acme", nudge_failures=2)
    assert (trace.state, trace.attempt, trace.result) == ("done", 3, {"org": "org-acme"})
    assert effect_keys() == ["provision:acme", "welcome:acme", "nudge-try:acme", "nudge-try:acme", "nudge-try:acme"]
    assert [(s.name, s.status, s.executions) for s in trace.steps.values()] == [
        ("provision", "completed", 1), ("welcome-email", "completed", 1), ("nudge", "completed", 3)]
    job = ops.get_job(trace.id)
    assert [(s["name"], s["executions"], s["output"]) for s in job["steps"]] == [
        ("provision", 1, {"key": "provision:acme", "id": "org-acme"}),
        ("welcome-email", 1, {"key": "welcome:acme"}),
        ("nudge", 3, {"nudged": "org-acme"}),
    ]
    assert job["steps"][2]["completed_at"] > job["steps"][2]["started_at"]  # two 1s retry delays passed


def test_a_failed_execution_is_recorded_with_its_error(jobs_clock) -> None:
    trace = run_job(step_jobs.onboard, org="down", nudge_failures=5)
    assert (trace.state, trace.stop_reason) == ("dead", "attempts-exhausted")
    nudge = trace.steps["nudge"]
    assert (nudge.status, nudge.executions) == ("failed", 3)
    assert "mail server down (attempt 3)" in nudge.error
    assert trace.steps["provision"].executions == 1


def test_replay_reads_the_run_s_steps_once_per_attempt(jobs_clock, step_reads) -> None:
    trace = run_job(step_jobs.onboard, org="reads", nudge_failures=2)
    assert trace.attempt == 3
    assert step_reads == [trace.run_id] * 3  # one read per attempt, however many steps replay


def test_the_first_run_answers_the_stored_json_form(declare) -> None:
    seen = []

    @declare(idempotency_key="{k}", tenant=NO_TENANT)
    def shapes(ctx, *, k: str) -> None:
        seen.append(ctx.step.run("when", lambda: dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)))
        seen.append(ctx.step.run("pair", lambda: (1, 2)))
        seen.append(ctx.step.run("none", lambda: None))

    run_job(shapes, k="x")
    assert seen == ["2026-01-02T03:04:05Z", [1, 2], None]


@pytest.mark.parametrize("value, why", [
    (object(), "not JSON-encodable"),
    (math.nan, "not JSON-encodable"),
    ("a\x00b", "NUL"),
    ("\ud800", "lone surrogate"),
    ("x" * 2000, "over the 1000-byte limit"),
])
def test_an_unstorable_output_is_terminal_and_nothing_is_written(declare, value, why) -> None:
    calls = []

    @declare(idempotency_key="{k}", tenant=NO_TENANT, retry=5)
    def bad(ctx, *, k: str) -> None:
        calls.append(1)
        try:
            ctx.step.run("out", lambda: value)
        except Exception:  # a body that swallows the error still ends with it
            pass

    with override_settings(ULTIMATE_JOBS={"MAX_STEP_OUTPUT_BYTES": 1000}):
        trace = run_job(bad, k="x")
    assert (trace.state, trace.error_code, trace.stop_reason, trace.attempt) == (
        "dead", "X_STEP_OUTPUT_UNSERIALIZABLE", "terminal", 1)
    assert why in trace.last_error
    assert calls == [1] and trace.steps == {}


def test_an_output_nested_too_deep_is_terminal(declare) -> None:
    deep: list = []
    for _ in range(100_000):
        deep = [deep]

    @declare(idempotency_key="{k}", tenant=NO_TENANT)
    def nested(ctx, *, k: str) -> None:
        ctx.step.run("deep", lambda: deep)

    trace = run_job(nested, k="x")
    assert (trace.state, trace.error_code) == ("dead", "X_STEP_OUTPUT_UNSERIALIZABLE")
    assert "nested too deeply" in trace.last_error


def test_a_step_name_used_twice_is_terminal_even_when_swallowed(declare) -> None:
    @declare(idempotency_key="{k}", tenant=NO_TENANT, retry=3)
    def twice(ctx, *, k: str) -> str:
        ctx.step.run("same", lambda: 1)
        try:
            ctx.step.run("same", lambda: 2)
        except Terminal:
            return "carried on"
        return "unreachable"

    trace = run_job(twice, k="x")
    assert (trace.state, trace.error_code, trace.attempt) == ("dead", "X_STEP_DUPLICATE", 1)
    assert trace.steps["same"].output == 1  # never overwritten


@pytest.mark.parametrize("call", [
    lambda ctx: ctx.step.run("unwinding", lambda: 1),
    lambda ctx: ctx.step.run("compensate:charge", lambda: 1),
    lambda ctx: ctx.step.sleep("compensate:nap", "1s"),
    lambda ctx: ctx.step.wait_for_event("unwinding", "x.y"),
    lambda ctx: ctx.step.run("", lambda: 1),
    lambda ctx: ctx.step.run("x" * 201, lambda: 1),
])
def test_reserved_and_malformed_step_names_are_refused(declare, call) -> None:
    @declare(idempotency_key="{k}", tenant=NO_TENANT)
    def reserved(ctx, *, k: str) -> None:
        call(ctx)

    trace = run_job(reserved, k="x")
    assert (trace.state, trace.error_code, trace.attempt) == ("dead", "X_JOB_DECLARATION_INVALID", 1)
    assert not JobStep.objects.exists()


def test_compensate_needs_compensates_true(declare) -> None:
    @declare(idempotency_key="{k}", tenant=NO_TENANT)
    def undeclared(ctx, *, k: str) -> None:
        ctx.step.run("charge", lambda: 1, compensate=lambda out: None)

    trace = run_job(undeclared, k="x")
    assert (trace.state, trace.error_code) == ("dead", "X_JOB_DECLARATION_INVALID")
    assert "compensates=True" in trace.last_error


def test_a_cancelled_run_s_step_write_is_refused(declare) -> None:
    @declare(idempotency_key="{k}", tenant=NO_TENANT)
    def cancelled(ctx, *, k: str) -> None:
        def work() -> int:
            ctx.cancelled.set("X_ABORTED", "an operator cancelled it")
            return 1

        ctx.step.run("work", work)

    trace = run_job(cancelled, k="x")
    assert trace.state == "running"  # a cancelled attempt settles nothing; its lease lapses
    assert trace.steps == {}


def test_a_step_write_on_a_row_that_is_no_longer_ours_is_fenced_out(declare) -> None:
    from ultimate_jobs.models import Job

    seen = []

    @declare(idempotency_key="{k}", tenant=NO_TENANT)
    def fenced(ctx, *, k: str) -> None:
        def work() -> int:
            Job.objects.filter(id=ctx.job_id).update(state="cancelled")  # an operator, meanwhile
            return 1

        try:
            ctx.step.run("work", work)
        finally:
            seen.append(ctx.cancelled.reason)

    trace = run_job(fenced, k="x")
    assert trace.state == "cancelled" and trace.steps == {}
    assert seen == ["X_JOB_LEASE_LOST"]


def test_final_attempt_is_true_on_the_last_attempt_only(declare) -> None:
    seen = []

    @declare(idempotency_key="{k}", tenant=NO_TENANT, retry=Retry(attempts=3, delay=0), compensates=True)
    def flaky(ctx, *, k: str) -> None:
        seen.append((ctx.attempt, ctx.max_attempts, ctx.final_attempt))
        raise RuntimeError("again")

    trace = run_job(flaky, k="x")
    assert seen == [(1, 3, False), (2, 3, False), (3, 3, True)]  # the unwind margin is not the body's
    assert (trace.state, trace.max_attempts) == ("dead", 5)


def test_effects_of_completed_steps_happen_once(jobs_clock) -> None:
    run_job(step_jobs.plain, key="p")
    assert Effect.objects.count() == 2


def test_async_bodies_may_compensate_and_use_steps(declare) -> None:
    """Refused before issue 26; their steps are tests/integration/steps/test_async_steps.py's."""

    @declare(idempotency_key="{k}", tenant=NO_TENANT, compensates=True)
    async def stepper(ctx, *, k: str) -> int:
        return await ctx.step.run("x", lambda: 1, compensate=lambda out: None)

    assert (stepper.compensates, stepper.is_async) == (True, True)
    trace = run_job(stepper, k="x")
    assert (trace.state, trace.result, trace.steps["x"].status) == ("done", 1, "completed")


def test_ctx_step_offers_only_the_documented_calls(declare) -> None:
    seen: dict[str, object] = {}

    @declare(idempotency_key="{k}", tenant=NO_TENANT)
    def probe(ctx, *, k: str) -> list[str]:
        seen["repr"] = repr(ctx.step)
        for internal in ("load", "run_internal", "mark", "latched", "compensators", "store", "_enter"):
            with pytest.raises(AttributeError):
                getattr(ctx.step, internal)
        return [name for name in dir(ctx.step) if not name.startswith("_")]

    trace = run_job(probe, k="api")
    assert (trace.state, trace.result) == ("done", ["run", "sleep", "wait_for_event"])
    assert str(seen["repr"]).startswith("<Steps run_id=")
