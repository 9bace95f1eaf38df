"""Compensation: only when the run failed for good, last in first out, durable across attempts."""

from __future__ import annotations

import pytest

from tests.app import step_jobs
from tests.integration.steps.conftest import effect_keys
from ultimate_jobs import NO_TENANT, Retry, Terminal, ops
from ultimate_jobs.testing import run_job

pytestmark = pytest.mark.django_db  # the helpers run on the test's thread, inside its transaction


def test_compensators_run_only_after_the_last_attempt_in_reverse_order(jobs_clock) -> None:
    trace = run_job(step_jobs.checkout, order="o1")
    assert effect_keys() == ["charge:o1", "reserve:o1", "ship-try:o1", "ship-try:o1", "ship-try:o1",
                             "release:rs-o1", "refund:ch-o1"]  # never on attempts 1 and 2
    assert (trace.state, trace.attempt, trace.max_attempts, trace.stop_reason) == ("dead", 3, 5, "attempts-exhausted")
    assert "carrier refused (attempt 3)" in trace.last_error and trace.error_code == "X_JOB_FAILED"
    assert list(trace.steps) == ["charge", "reserve", "ship", "unwinding", "compensate:reserve", "compensate:charge"]
    assert trace.steps["unwinding"].output["code"] == "X_JOB_FAILED"


def test_a_run_that_succeeds_on_a_retry_compensates_nothing(jobs_clock) -> None:
    trace = run_job(step_jobs.checkout, order="o2", ship_failures=2)
    assert (trace.state, trace.result) == ("done", "shipped")
    assert [k for k in effect_keys() if k.startswith(("refund", "release"))] == []


def test_a_terminal_error_unwinds_on_the_attempt_it_happened(declare) -> None:
    undone = []

    @declare(idempotency_key="{k}", tenant=NO_TENANT, compensates=True, retry=5)
    def declined(ctx, *, k: str) -> None:
        ctx.step.run("hold", lambda: {"hold": 1}, compensate=lambda out: undone.append(out))
        raise Terminal("the card was declined")

    trace = run_job(declined, k="x")
    assert (trace.state, trace.attempt, trace.stop_reason, trace.error_code) == ("dead", 1, "terminal", "X_TERMINAL")
    assert undone == [{"hold": 1}]


def test_a_failing_compensator_goes_back_while_attempts_remain_then_dead_letters(jobs_clock) -> None:
    trace = run_job(step_jobs.checkout, order="o3", release_failures=5)
    assert (trace.state, trace.error_code, trace.attempt) == ("dead", "X_JOB_COMPENSATION_FAILED", 5)
    assert "compensator of step 'reserve' failed" in trace.last_error
    assert "carrier refused" in trace.last_error  # the original failure is kept
    assert effect_keys("ship-try") == ["ship-try:o3"] * 3  # the unwind attempts never ran the forward path
    assert trace.steps["compensate:reserve"].status == "failed"
    assert "compensate:charge" not in trace.steps  # LIFO: charge is undone only after reserve


def test_a_retry_continues_the_unwind_never_the_forward_path(jobs_clock) -> None:
    trace = run_job(step_jobs.checkout, order="o4", release_failures=3)
    assert trace.error_code == "X_JOB_COMPENSATION_FAILED"
    ops.retry_job(trace.id)  # the stock service is back (3 failures spent)
    from ultimate_jobs.testing import drain

    (trace,) = drain()
    assert trace.state == "dead" and trace.error_code == "X_JOB_FAILED"  # ends with the original failure
    assert effect_keys("ship-try") == ["ship-try:o4"] * 3
    assert effect_keys("re") == ["reserve:o4", "release-try:o4", "release-try:o4", "release-try:o4",
                                 "release:rs-o4", "refund:ch-o4"]


def test_a_crash_on_the_final_attempt_is_claimed_again_and_unwinds(jobs_clock) -> None:
    from ultimate_jobs.testing import SimulatedCrash, crash_at
    from ultimate_jobs.testing.runner import Runner

    result = step_jobs.checkout.using(run_id=None).enqueue(order="o5")
    runner = Runner()
    for _ in (1, 2):
        runner.run(runner.claim(result.id))
        jobs_clock.advance("1s")
    with crash_at("before_step_body", "ship"), pytest.raises(SimulatedCrash):
        runner.run(runner.claim(result.id))  # attempt 3, the last forward one, dies
    runner.lapse()
    from ultimate_jobs.testing import drain

    (trace,) = drain()
    assert (trace.state, trace.attempt) == ("dead", 4)  # the margin's first attempt unwound
    assert effect_keys("re") == ["reserve:o5", "release:rs-o5", "refund:ch-o5"]
    assert trace.error_code == "X_LEASE_LAPSED"


def test_once_with_unknown_outcome_stops_the_unwind(declare, jobs_clock) -> None:
    from ultimate_jobs.testing import SimulatedCrash, crash_at, drain
    from ultimate_jobs.testing.runner import Runner

    @declare(idempotency_key="{k}", tenant=NO_TENANT, compensates=True, retry=Retry(attempts=1))
    def risky(ctx, *, k: str) -> None:
        ctx.step.run("a", lambda: 1, compensate=lambda out: None)
        ctx.step.run("b", lambda: 2, once=True, compensate=lambda out: None)

    result = risky.enqueue(k="x")
    runner = Runner()
    with crash_at("before_step_body", "b"), pytest.raises(SimulatedCrash):
        runner.run(runner.claim(result.id))
    runner.lapse()
    (trace,) = drain()
    assert (trace.state, trace.error_code) == ("dead", "X_JOB_COMPENSATION_FAILED")
    assert "outcome" in trace.last_error or "'b'" in trace.last_error


def test_an_unwind_cancelled_midway_settles_nothing_and_one_that_breaks_is_retried(declare, monkeypatch) -> None:
    from django.db import OperationalError

    from ultimate_jobs.runtime.steps import Steps

    @declare(idempotency_key="{k}", tenant=NO_TENANT, compensates=True, retry=1)
    def cancelled(ctx, *, k: str) -> None:
        ctx.step.run("a", lambda: 1, compensate=lambda out: ctx.cancelled.set("X_ABORTED"))
        raise Terminal("stop")

    trace = run_job(cancelled, k="x")
    assert trace.state == "running"  # cancelled mid-unwind: nothing settled, the compensator's write refused
    assert "compensate:a" not in trace.steps

    @declare(idempotency_key="{k}", tenant=NO_TENANT, compensates=True, retry=1)
    def breaks(ctx, *, k: str) -> None:
        ctx.step.run("a", lambda: 1, compensate=lambda out: None)
        raise Terminal("stop")

    original = Steps.mark
    calls = []

    def flaky_mark(self, name, output):
        calls.append(name)
        if len(calls) == 1:
            raise OperationalError("the connection dropped")
        return original(self, name, output)

    monkeypatch.setattr(Steps, "mark", flaky_mark)
    trace = run_job(breaks, k="y")
    assert (trace.state, trace.attempt, trace.error_code) == ("dead", 2, "X_TERMINAL")  # the next claim unwound
    assert list(trace.steps) == ["a", "unwinding", "compensate:a"]
