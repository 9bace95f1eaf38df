"""Durable steps in ``async def`` bodies: the sync steps' rules, awaited.

Run through the real execution path by the test helpers, on this thread's connection (the body's
loop runs beside it under ``async_to_sync``), so each test sits inside its own transaction and
the evidence is the data the steps wrote: ``Effect`` rows and the stored steps.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async

from tests.app import async_step_jobs as jobs
from tests.app.models import Effect
from tests.integration.steps.conftest import effect_keys
from ultimate_jobs import NO_TENANT, Retry, publish_event
from ultimate_jobs.models import Job
from ultimate_jobs.testing import drain, run_job

pytestmark = pytest.mark.django_db  # the helpers run on the test's thread, inside its transaction

NOW = Retry(attempts=3, backoff="fixed", delay=0, jitter=False)


def test_a_failing_third_step_retries_only_that_step(jobs_clock) -> None:
    trace = run_job(jobs.onboard, org="acme", nudge_failures=2)
    assert (trace.state, trace.attempt, trace.result) == ("done", 3, {"org": "org-acme"})
    # the def step and the async def step replayed from storage; only the failing one ran again
    assert effect_keys() == ["provision:acme", "welcome:acme", "nudge-try:acme", "nudge-try:acme", "nudge-try:acme"]
    assert [(s.name, s.status, s.executions) for s in trace.steps.values()] == [
        ("provision", "completed", 1), ("welcome-email", "completed", 1), ("nudge", "completed", 3)]
    assert trace.steps["provision"].output == {"key": "provision:acme", "id": "org-acme"}


def test_a_failed_execution_is_recorded_with_its_error(jobs_clock) -> None:
    trace = run_job(jobs.onboard, org="down", nudge_failures=5)
    assert (trace.state, trace.stop_reason) == ("dead", "attempts-exhausted")
    nudge = trace.steps["nudge"]
    assert (nudge.status, nudge.executions) == ("failed", 3)
    assert "ConnectionError: mail server down (attempt 3)" in trace.last_error


def test_run_answers_the_stored_json_form_with_a_def_or_an_async_def(declare) -> None:
    import datetime as dt

    seen: list[object] = []

    async def stamp() -> dict:
        return {"at": dt.datetime(2026, 1, 2, tzinfo=dt.UTC), "pair": (1, 2)}

    @declare(idempotency_key="{k}", tenant=NO_TENANT)
    async def forms(ctx, *, k: str) -> list:
        seen.append(await ctx.step.run("async", stamp))
        seen.append(await ctx.step.run("def", lambda: (3, 4)))
        seen.append(await ctx.step.run("def-to-coroutine", lambda: stamp()))
        return seen

    trace = run_job(forms, k="x")
    stored = {"at": "2026-01-02T00:00:00Z", "pair": [1, 2]}
    assert (trace.state, seen) == ("done", [stored, [3, 4], stored])


def test_a_def_step_runs_off_the_event_loop_and_an_async_one_on_it(declare) -> None:
    where: dict[str, bool] = {}

    def on_loop() -> bool:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return False
        return True

    async def awaited() -> None:
        where["async def"] = on_loop()

    @declare(idempotency_key="{k}", tenant=NO_TENANT)
    async def placed(ctx, *, k: str) -> None:
        await ctx.step.run("def", lambda: where.setdefault("def", on_loop()))
        await ctx.step.run("async", awaited)

    assert run_job(placed, k="x").state == "done"
    assert where == {"def": False, "async def": True}


def test_once_stops_with_an_unknown_outcome_after_its_fn_raised(declare, jobs_clock) -> None:
    calls: list[int] = []

    @declare(idempotency_key="{k}", tenant=NO_TENANT, retry=NOW)
    async def gateway(ctx, *, k: str) -> None:
        async def charge() -> None:
            calls.append(ctx.attempt)
            raise TimeoutError("no answer: was the card charged?")

        await ctx.step.run("charge", charge, once=True)

    trace = run_job(gateway, k="x")
    assert (trace.state, trace.error_code, trace.attempt) == ("dead", "X_STEP_OUTCOME_UNKNOWN", 2)
    assert calls == [1]  # never called again
    assert trace.steps["charge"].status == "failed"


def test_atomic_with_a_def_commits_its_writes_with_the_checkpoint(declare) -> None:
    @declare(idempotency_key="{k}", tenant=NO_TENANT, retry=NOW)
    async def writes(ctx, *, k: str) -> int:
        def write() -> int:
            row = Effect.objects.create(key=f"atomic:{k}", attempt=ctx.attempt)
            if ctx.attempt == 1:
                raise RuntimeError("failed after the write")
            return row.attempt

        return await ctx.step.run("write", write, atomic=True)

    trace = run_job(writes, k="x")
    assert (trace.state, trace.result, trace.attempt) == ("done", 2, 2)
    assert effect_keys("atomic") == ["atomic:x"]  # the first attempt's write rolled back with its step
    assert trace.steps["write"].executions == 2  # the failure is recorded after its rollback, as in a def body


def test_atomic_with_an_async_def_is_refused_when_the_step_is_reached(declare) -> None:
    reached: list[str] = []

    async def write() -> None:
        reached.append("fn")

    @declare(idempotency_key="{k}", tenant=NO_TENANT, retry=NOW)
    async def refused(ctx, *, k: str) -> None:
        await ctx.step.run("first", lambda: reached.append("first"))
        await ctx.step.run("write", write, atomic=True)

    trace = run_job(refused, k="x")
    assert (trace.state, trace.attempt, trace.error_code) == ("dead", 1, "X_JOB_DECLARATION_INVALID")
    assert "atomic=True takes a def" in trace.last_error
    assert reached == ["first"] and "write" not in trace.steps


def test_compensators_def_and_async_def_unwind_last_in_first_out(jobs_clock) -> None:
    trace = run_job(jobs.checkout, order="o1")
    assert effect_keys() == ["charge:o1", "reserve:o1", "ship-try:o1", "ship-try:o1", "ship-try:o1",
                             "release:rs-o1", "refund:ch-o1"]  # never on attempts 1 and 2
    assert (trace.state, trace.attempt, trace.max_attempts, trace.stop_reason) == ("dead", 3, 5, "attempts-exhausted")
    assert list(trace.steps) == ["charge", "reserve", "ship", "unwinding", "compensate:reserve", "compensate:charge"]


def test_a_run_that_succeeds_on_a_retry_compensates_nothing(jobs_clock) -> None:
    trace = run_job(jobs.checkout, order="o2", ship_failures=2)
    assert (trace.state, trace.result) == ("done", "shipped")
    assert [k for k in effect_keys() if k.startswith(("refund", "release"))] == []


def test_an_unwind_cut_short_continues_on_the_next_claim_never_the_forward_path(declare, jobs_clock) -> None:
    undone: list[str] = []

    @declare(idempotency_key="{k}", tenant=NO_TENANT, compensates=True, retry=Retry(attempts=1))
    async def flaky_undo(ctx, *, k: str) -> None:
        async def release(out: dict) -> None:
            undone.append(f"release try {ctx.attempt}")
            if ctx.attempt == 1:
                raise ConnectionError("the stock service is down")

        await ctx.step.run("hold", lambda: {"hold": 1}, compensate=lambda out: undone.append("drop"))
        await ctx.step.run("reserve", lambda: {"reserve": 1}, compensate=release)
        raise RuntimeError("forward failed")

    trace = run_job(flaky_undo, k="x")
    # attempt 1: forward failed, the release failed; attempt 2 (the margin) replays and unwinds again
    assert (trace.state, trace.attempt, trace.error_code) == ("dead", 2, "X_JOB_FAILED")
    assert undone == ["release try 1", "release try 2", "drop"]
    assert [(n, s.status) for n, s in trace.steps.items()] == [
        ("hold", "completed"), ("reserve", "completed"), ("unwinding", "completed"),
        ("compensate:reserve", "completed"), ("compensate:hold", "completed")]


def test_a_sleep_suspends_and_resumes_at_the_wake_time(jobs_clock) -> None:
    trace = run_job(jobs.sleeper, key="s", seconds=3600)
    assert (trace.state, trace.attempt) == ("suspended", 0)  # the attempt was handed back
    assert trace.run_at == jobs_clock.now() + timedelta(seconds=3600)
    assert drain(advance="59m") == []
    (trace,) = drain(advance="1m")
    assert (trace.state, trace.attempt, trace.result["attempt"]) == ("done", 1, 1)
    assert effect_keys() == ["before:s", "after:s"]
    assert list(trace.steps) == ["before", "sleep:1", "after"]


def test_an_event_wakes_the_waiter_and_is_its_answer(jobs_clock) -> None:
    trace = run_job(jobs.waiter, key="k1")
    assert (trace.state, trace.attempt) == ("suspended", 0)
    assert publish_event("tests.reply", {"key": "someone-else"}) == 0
    assert publish_event("tests.reply", {"key": "k1", "answer": 42}) == 1
    (trace,) = drain()
    assert (trace.state, trace.result) == ("done", {"key": "k1", "answer": 42})
    assert effect_keys() == ["after-wait:k1"]


def test_a_wait_times_out_with_none(jobs_clock) -> None:
    trace = run_job(jobs.waiter, key="late", timeout=60)
    assert trace.state == "suspended"
    (trace,) = drain(advance="61s")
    assert (trace.state, trace.result) == ("done", None)
    publish_event("tests.reply", {"key": "late"})  # after the recorded timeout: changes nothing
    assert drain() == [] and Job.objects.get(id=trace.id).result is None


def test_steps_side_by_side_overlap_and_take_their_order_from_the_call(declare) -> None:
    running: list[str] = []

    async def part(name: str) -> str:
        running.append(f"start {name}")
        await asyncio.sleep(0.05)
        running.append(f"end {name}")
        return name

    @declare(idempotency_key="{k}", tenant=NO_TENANT)
    async def fan_out(ctx, *, k: str) -> list:
        return list(await asyncio.gather(ctx.step.run("a", lambda: part("a")), ctx.step.run("b", lambda: part("b"))))

    trace = run_job(fan_out, k="x")
    assert (trace.state, trace.result) == ("done", ["a", "b"])
    assert running[:2] == ["start a", "start b"]  # b began before a ended
    assert list(trace.steps) == ["a", "b"]


def test_awaited_progress_is_written_and_the_last_report_kept(declare) -> None:
    seen: list[object] = []

    @declare(idempotency_key="{k}", tenant=NO_TENANT)
    async def reports(ctx, *, k: str) -> None:
        await ctx.progress(1, total=3, note="first")
        seen.append(await sync_to_async(lambda: Job.objects.get(id=ctx.job_id).progress)())
        ctx.progress(2, total=3)  # within the second: not written yet; not awaited either
        ctx.progress(3, total=3, note="last")

    trace = run_job(reports, k="x")
    assert trace.state == "done"
    assert seen == [{"done": 1, "total": 3, "note": "first"}]
    assert Job.objects.get(id=trace.id).progress == {"done": 3, "total": 3, "note": "last"}


def test_a_timeout_cancels_the_bodys_task_at_its_next_await(declare) -> None:
    seen: list[str] = []

    @declare(idempotency_key="{k}", tenant=NO_TENANT, timeout=0.3, retry=1)
    async def stuck(ctx, *, k: str) -> None:
        await ctx.step.run("first", lambda: {"ok": 1})
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append(f"cancelled, token {ctx.cancelled.reason}")
            raise

    began = time.monotonic()
    trace = run_job(stuck, k="x")
    assert time.monotonic() - began < 10  # not the 30 s sleep
    assert seen == ["cancelled, token X_JOB_TIMEOUT"]
    assert (trace.state, trace.error_code) == ("dead", "X_JOB_TIMEOUT")


def test_a_step_timeout_cancels_an_awaited_step(declare) -> None:
    @declare(idempotency_key="{k}", tenant=NO_TENANT, step_timeout=0.3, retry=1)
    async def slow_step(ctx, *, k: str) -> None:
        await ctx.step.run("slow", lambda: asyncio.sleep(30))

    began = time.monotonic()
    trace = run_job(slow_step, k="x")
    assert time.monotonic() - began < 10
    assert (trace.state, trace.error_code) == ("dead", "X_JOB_TIMEOUT")
    assert "step 'slow' passed its step_timeout" in trace.last_error
    assert "slow" not in trace.steps  # nothing stored for a step cut at its await


def test_the_step_rules_hold(declare) -> None:
    @declare(idempotency_key="{case}", tenant=NO_TENANT, retry=NOW)
    async def rules(ctx, *, case: str) -> None:
        if case == "duplicate":
            await ctx.step.run("same", lambda: 1)
            await ctx.step.run("same", lambda: 2)
        elif case == "nan":
            await ctx.step.run("rows", lambda: float("nan"))
        elif case == "reserved":
            await ctx.step.run("unwinding", lambda: 1)
        else:
            await ctx.step.run("undo", lambda: 1, compensate=lambda out: None)

    answers = {case: run_job(rules, case=case) for case in ("duplicate", "nan", "reserved", "compensate")}
    assert {case: (t.state, t.error_code, t.attempt) for case, t in answers.items()} == {
        "duplicate": ("dead", "X_STEP_DUPLICATE", 1), "nan": ("dead", "X_STEP_OUTPUT_UNSERIALIZABLE", 1),
        "reserved": ("dead", "X_JOB_DECLARATION_INVALID", 1), "compensate": ("dead", "X_JOB_DECLARATION_INVALID", 1)}


def test_ctx_step_offers_only_the_documented_coroutines(declare) -> None:
    seen: dict[str, object] = {}

    @declare(idempotency_key="{k}", tenant=NO_TENANT)
    async def probe(ctx, *, k: str) -> list[str]:
        seen["repr"] = repr(ctx.step)
        for internal in ("load", "run_internal", "mark", "latched", "compensators", "store", "_enter"):
            with pytest.raises(AttributeError):
                getattr(ctx.step, internal)
        seen["coroutines"] = [asyncio.iscoroutinefunction(getattr(ctx.step, n)) for n in ("run", "sleep",
                                                                                           "wait_for_event")]
        return [name for name in dir(ctx.step) if not name.startswith("_")]

    trace = run_job(probe, k="api")
    assert (trace.state, trace.result) == ("done", ["run", "sleep", "wait_for_event"])
    assert str(seen["repr"]).startswith("<Steps run_id=") and seen["coroutines"] == [True, True, True]


@pytest.mark.django_db(transaction=True)
def test_crash_proof_holds_for_an_async_body_at_every_step_boundary(jobs_clock) -> None:
    from ultimate_jobs.testing import crash_proof

    report = crash_proof(jobs.plain, {"key": "cp"})
    assert report.reference.state == "done"
    assert report.effects == {"effect:first:cp": 1, "effect:second:cp": 1, "rows:testapp_effect": 2}
    assert report.boundaries == [(point, step) for step in ("first", "second")
                                 for point in ("before_step_body", "after_checkpoint_commit")]
    assert all(run.crashed for run in report.runs) and {run.trace.state for run in report.runs} == {"done"}
