"""``ctx.progress``, ``on_settled`` and ``timeout``/``step_timeout``, through the real worker loop."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from tests.conftest import wait_for
from ultimate_jobs import NO_TENANT, JobsError, Retry, Settled, Worker, ops
from ultimate_jobs.db import store_for
from ultimate_jobs.models import Job, JobStep
from ultimate_jobs.runtime.on_settled import outcome_of
from ultimate_jobs.testing import run_job

pytestmark = pytest.mark.django_db(transaction=True)


def burst() -> dict[str, int]:
    with Worker(queues=["default"], burst=True) as worker:
        return worker.run(install_signals=False)


@pytest.fixture
def progress_writes(monkeypatch):
    writes: list[str] = []
    store_type = type(store_for())
    original = store_type.job_progress

    def spy(self, **kwargs):
        writes.append(kwargs["progress"])
        return original(self, **kwargs)

    monkeypatch.setattr(store_type, "job_progress", spy)
    return writes


def test_progress_is_throttled_and_the_last_report_is_always_written(declare, progress_writes) -> None:
    @declare(idempotency_key="{k}", tenant=NO_TENANT)
    def counts(ctx, *, k: str) -> None:
        for n in range(1, 101):
            ctx.progress(n, 100, note=f"row {n}")

    result = counts.enqueue(k="x")
    burst()
    assert len(progress_writes) == 2  # the first report at once, the last one before the settle
    assert ops.get_job(result.id)["progress"] == {"done": 100, "total": 100, "note": "row 100"}


def test_progress_writes_once_a_second_at_most(declare, progress_writes) -> None:
    @declare(idempotency_key="{k}", tenant=NO_TENANT)
    def slow(ctx, *, k: str) -> None:
        deadline = time.monotonic() + 1.3
        n = 0
        while time.monotonic() < deadline:
            n += 1
            ctx.progress(n)
            time.sleep(0.01)

    slow.enqueue(k="x")
    burst()
    assert 2 <= len(progress_writes) <= 3


def test_progress_of_a_cancelled_run_is_not_written_and_bad_reports_are_refused(declare, progress_writes) -> None:
    errors = []

    @declare(idempotency_key="{k}", tenant=NO_TENANT)
    def cancelled(ctx, *, k: str) -> None:
        for bad in [(-1,), (float("nan"),), (True,), (1, "x"), (1, None, 5)]:
            try:
                ctx.progress(*bad)
            except JobsError as err:
                errors.append(err.code)
        ctx.cancelled.set("X_ABORTED")
        ctx.progress(1, 2)

    run_job(cancelled, k="x")
    assert errors == ["X_PROGRESS_INVALID"] * 5
    assert progress_writes == []


def test_on_settled_hears_completed_after_the_row_settled(declare) -> None:
    heard: list[tuple[Settled, str]] = []

    def hook(settled: Settled) -> None:
        heard.append((settled, Job.objects.get(id=settled.job_id).state))

    @declare(idempotency_key="{k}", tenant="{org}", on_settled=hook)
    def ok(ctx, *, k: str, org: str) -> dict:
        return {"rows": 3}

    result = ok.enqueue(k="x", org="acme")
    burst()
    wait_for(lambda: heard, timeout=10)
    settled, state_seen = heard[0]
    assert state_seen == "done"  # called after the settle statement answered
    assert (settled.outcome, settled.result, settled.input, settled.tenant_id) == (
        "completed", {"rows": 3}, {"k": "x", "org": "acme"}, "acme")
    assert settled.job_id == result.id and settled.code is None
    time.sleep(0.2)
    assert len(heard) == 1


def test_on_settled_hears_dead_lettered_and_dropped_never_retries_or_suspensions(declare, jobs_clock) -> None:
    heard: list[Settled] = []

    @declare(idempotency_key="{k}", tenant=NO_TENANT, on_settled=heard.append, retry=Retry(attempts=2, delay=0))
    def dies(ctx, *, k: str) -> None:
        ctx.step.sleep("nap", "1s")
        raise ValueError(f"boom {ctx.attempt}")

    @declare(idempotency_key="{k}", tenant=NO_TENANT, on_settled=heard.append,
             retry=Retry(attempts=1, dead_letter=False))
    def dropped(ctx, *, k: str) -> None:
        raise ValueError("dropped")

    trace = run_job(dies, k="x")
    assert trace.state == "suspended" and heard == []
    from ultimate_jobs.testing import drain

    drain(advance="1s")
    run_job(dropped, k="y")
    assert [(s.outcome, s.code, s.attempt) for s in heard] == [("dead-lettered", "X_JOB_FAILED", 2),
                                                               ("dropped", "X_JOB_FAILED", 1)]
    assert "boom 2" in heard[0].error


def test_outcomes_map_states_to_the_four_endings() -> None:
    assert [outcome_of(s, c) for s, c in [("done", None), ("dead", "X"), ("failed", "X_JOB_KEY_BUSY"),
                                          ("failed", "X"), ("ready", None), ("suspended", None),
                                          ("cancelled", None)]] == [
        "completed", "dead-lettered", "refused", "dropped", None, None, None]


def test_a_failing_hook_gets_three_tries_then_is_logged_and_the_outcome_stands(declare, caplog) -> None:
    tries = []

    def hook(settled: Settled) -> None:
        tries.append(settled.outcome)
        raise RuntimeError("the webhook is down")

    @declare(idempotency_key="{k}", tenant=NO_TENANT, on_settled=hook)
    def fine(ctx, *, k: str) -> str:
        return "ok"

    with caplog.at_level(logging.ERROR, logger="ultimate_jobs"):
        result = fine.enqueue(k="x")
        burst()
        wait_for(lambda: "X_JOB_ON_SETTLED_FAILED" in caplog.text, timeout=10)
    assert tries == ["completed"] * 3
    assert ops.get_job(result.id)["state"] == "done"


def test_a_hook_past_its_timeout_is_cancelled_and_abandoned(declare, caplog) -> None:
    seen = []
    release = threading.Event()

    def hook(settled: Settled) -> None:
        seen.append("start")
        release.wait(5)
        seen.append(settled.cancelled.reason)

    @declare(idempotency_key="{k}", tenant=NO_TENANT, on_settled=hook, on_settled_timeout="300ms")
    def fine(ctx, *, k: str) -> str:
        return "ok"

    with caplog.at_level(logging.ERROR, logger="ultimate_jobs"):
        fine.enqueue(k="x")
        burst()
        wait_for(lambda: "X_JOB_ON_SETTLED_FAILED" in caplog.text, timeout=10)
    release.set()
    wait_for(lambda: len(seen) == 2, timeout=5)
    assert seen == ["start", "X_JOB_TIMEOUT"]  # one try: a timed-out hook is not tried again


def test_step_timeout_sets_the_token_then_fails_the_attempt(declare) -> None:
    seen = []

    @declare(idempotency_key="{k}", tenant=NO_TENANT, step_timeout="200ms", retry=1)
    def stuck(ctx, *, k: str) -> None:
        def wait() -> str:
            seen.append(ctx.cancelled.wait(5))  # wakes when the worker sets the token
            return "late"

        ctx.step.run("quick", lambda: "fast enough")
        ctx.step.run("stuck", wait)

    result = stuck.enqueue(k="x")
    started = time.monotonic()
    burst()
    assert time.monotonic() - started < 4
    job = ops.get_job(result.id)
    assert (job["state"], job["error_code"]) == ("dead", "X_JOB_TIMEOUT")
    assert "step 'stuck' passed its step_timeout" in job["last_error"]
    wait_for(lambda: seen, timeout=5)
    assert seen == [True]
    assert list(JobStep.objects.values_list("name", "status")) == [("quick", "completed")]  # "late" refused


def test_step_timeout_in_run_job(declare) -> None:
    @declare(idempotency_key="{k}", tenant=NO_TENANT, step_timeout="100ms", retry=2)
    def stuck(ctx, *, k: str) -> None:
        ctx.step.run("stuck", lambda: ctx.cancelled.wait(5))

    trace = run_job(stuck, k="x")
    assert (trace.state, trace.error_code, trace.attempt) == ("dead", "X_JOB_TIMEOUT", 2)
    assert trace.steps == {}


def test_a_body_ignoring_the_timeout_is_named_abandoned_one_that_stops_is_not(declare, caplog) -> None:
    @declare(idempotency_key="{k}", tenant=NO_TENANT, timeout="100ms", retry=1)
    def ignores(ctx, *, k: str) -> str:
        time.sleep(0.4)
        return "finished anyway"

    @declare(idempotency_key="{k}", tenant=NO_TENANT, timeout="100ms", retry=1)
    def stops(ctx, *, k: str) -> None:
        ctx.cancelled.wait(5)
        ctx.cancelled.check()

    with caplog.at_level(logging.WARNING, logger="ultimate_jobs"):
        a, b = ignores.enqueue(k="a"), stops.enqueue(k="b")
        burst()
        wait_for(lambda: "jobs.timeout.abandoned" in caplog.text, timeout=5)
        time.sleep(0.2)
    abandoned = [r.getMessage() for r in caplog.records if "jobs.timeout.abandoned" in r.getMessage()]
    assert len(abandoned) == 1 and str(a.id) in abandoned[0]
    assert ops.get_job(a.id)["error_code"] == ops.get_job(b.id)["error_code"] == "X_JOB_TIMEOUT"


def test_a_lease_lapsing_on_the_final_attempt_is_told_dead_lettered(declare, frozen_clock) -> None:
    from datetime import timedelta

    heard: list[Settled] = []

    @declare(idempotency_key="{k}", tenant="{org}", on_settled=heard.append, retry=1)
    def lapsed(ctx, *, k: str, org: str) -> None:
        return None

    result = lapsed.enqueue(k="x", org="acme")
    Job.objects.filter(id=result.id).update(state="running", attempt=1, claimed_by="dead-worker",
                                            visible_at=frozen_clock.now() - timedelta(seconds=1))
    burst()
    wait_for(lambda: heard, timeout=10)
    (settled,) = heard
    assert (settled.outcome, settled.code, settled.input, settled.tenant_id) == (
        "dead-lettered", "X_LEASE_LAPSED", {"k": "x", "org": "acme"}, "acme")


def test_async_bodies_report_progress_and_a_payload_that_is_not_kwargs_still_settles(declare) -> None:
    import asyncio

    heard: list[Settled] = []

    @declare(idempotency_key="{k}", tenant=NO_TENANT, on_settled=heard.append, retry=1)
    async def counts(ctx, *, k: str) -> str:
        for n in range(1, 6):
            ctx.progress(n, 5)
            await asyncio.sleep(0)
        return "ok"

    good, bad = counts.enqueue(k="good"), counts.enqueue(k="bad")
    Job.objects.filter(id=bad.id).update(payload=["not", "an", "object"])  # the call itself fails
    burst()
    assert ops.get_job(good.id)["progress"] == {"done": 5, "total": 5, "note": None}
    assert (ops.get_job(bad.id)["state"], ops.get_job(bad.id)["progress"]) == ("dead", None)
    wait_for(lambda: len(heard) == 2, timeout=10)
    assert sorted(s.outcome for s in heard) == ["completed", "dead-lettered"]
