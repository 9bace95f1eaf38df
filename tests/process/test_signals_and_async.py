"""Signals to a real worker process, and sync and ``async def`` bodies side by side in one."""

from __future__ import annotations

import signal
import time
from datetime import datetime

import pytest

from tests.app.jobs import async_pid, record, slow
from tests.app.models import Effect
from tests.conftest import WorkerProcess
from tests.process.conftest import Start, assert_stopped_with, job_states, log_text, wait_exit, wait_until
from ultimate_jobs import ops
from ultimate_jobs.conf import get_settings
from ultimate_jobs.models import Job

pytestmark = pytest.mark.process

EXIT_MARGIN = 1.5  # interpreter shutdown and listener teardown, on a loaded two-core machine


def logged_at(worker: WorkerProcess, event: str) -> float:
    """When the worker logged ``event`` first, in seconds on its log clock."""
    line = next(line for line in log_text(worker).splitlines() if f" {event} " in line)
    return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_sigterm_to_an_idle_worker_exits_zero_within_one_poll_interval(
        started_worker: Start, signum: signal.Signals) -> None:
    idle_poll_max = get_settings().IDLE_POLL_MAX  # the longest an idle worker sleeps between passes (200 ms)
    worker = started_worker()
    # Idle for several empty passes, so it sleeps the longest poll (50 -> 100 -> 200 ms) when signalled.
    time.sleep(4 * idle_poll_max)
    assert worker.proc.poll() is None

    worker.signal(signum)
    code, took = wait_exit(worker, timeout=15)
    assert code == 0, log_text(worker)
    assert took < idle_poll_max + EXIT_MARGIN, f"exited {took:.2f}s after SIGTERM"
    out = log_text(worker)
    assert "jobs.worker.drain-signalled" in out and "jobs.worker.stopped" in out
    assert_stopped_with(worker, claimed=0, settled=0, interrupted=0, lost=0)


def test_sigterm_drains_a_running_job_back_to_ready_uncounted(started_worker: Start) -> None:
    worker = started_worker()
    result = slow.enqueue(key="drained", seconds=60)
    wait_until(lambda: Effect.objects.filter(key="start:drained").exists(), timeout=20, procs=(worker,),
               what="the slow job started")

    worker.signal(signal.SIGTERM)
    code, took = wait_exit(worker, timeout=15)
    assert code == 0, log_text(worker)
    assert took < 5, f"a cooperative body drained in {took:.2f}s"
    row = Job.objects.get(id=result.id)
    # Back in the queue at once, the attempt handed back.
    assert (row.state, row.attempt, row.stop_reason) == ("ready", 0, None)
    assert not Effect.objects.filter(key="done:drained").exists()
    assert_stopped_with(worker, claimed=1, settled=0, interrupted=1, lost=0)


def test_a_body_ignoring_the_drain_is_abandoned_at_the_drain_timeout_and_reclaimed(
        started_worker: Start) -> None:
    short_lease = {"JOBS_TEST_VISIBILITY": "2s"}
    worker = started_worker("--drain-timeout", "500ms", env=short_lease)
    result = record.enqueue(key="stubborn", sleep=2.0)  # time.sleep: never looks at ctx.cancelled
    wait_until(lambda: Job.objects.filter(id=result.id, state="running").exists(), timeout=20,
               procs=(worker,), what="the stubborn job claimed")

    worker.signal(signal.SIGTERM)
    code, took = wait_exit(worker, timeout=15)
    assert code == 0, log_text(worker)
    # Abandoned at the deadline (measured on the worker's own log clock) ...
    waited = logged_at(worker, "jobs.worker.drain-abandoned") - logged_at(worker, "jobs.worker.drain-signalled")
    assert 0.45 <= waited < 1.0, f"the drain deadline was 0.5s; abandoned after {waited:.2f}s"
    assert str(result.id) in log_text(worker)
    # ... and out soon after (the worker gives idle body threads up to 1s to close their connections).
    assert took < 3.0, f"exited {took:.2f}s after SIGTERM with --drain-timeout 500ms"
    assert Job.objects.get(id=result.id).state == "running"  # left to its lease: at-least-once

    rescuer = started_worker(env=short_lease)
    wait_until(lambda: Job.objects.filter(id=result.id, state="done").exists(), timeout=30, procs=(rescuer,),
               what="the abandoned job reclaimed and done")
    job = ops.get_job(result.id)
    assert job["attempt"] == 2
    # The abandoned body died with its process before its effect; the reclaimed one wrote it once.
    assert list(Effect.objects.filter(key="stubborn").values_list("attempt", "pid")) == [(2, rescuer.pid)]


def test_a_second_signal_exits_at_once(started_worker: Start) -> None:
    worker = started_worker()  # drain timeout 25s
    result = record.enqueue(key="sleeper", sleep=30.0)
    wait_until(lambda: Job.objects.filter(id=result.id, state="running").exists(), timeout=20,
               procs=(worker,), what="the sleeper claimed")
    worker.signal(signal.SIGTERM)
    wait_until(lambda: "jobs.worker.drain-signalled" in log_text(worker), timeout=10, procs=(worker,),
               what="the worker draining")
    assert worker.proc.poll() is None  # still waiting for the body that ignores the drain

    worker.signal(signal.SIGTERM)
    code, took = wait_exit(worker, timeout=10)
    assert code == 1, log_text(worker)
    assert took < 2, f"exited {took:.2f}s after the second signal"
    assert "jobs.worker.killed" in log_text(worker)


def test_async_and_sync_jobs_both_finish_in_one_worker(worker_process: Start) -> None:
    async_jobs = async_pid.enqueue_many([{"key": f"a{n}", "seconds": 0.5} for n in range(4)])
    sync_jobs = record.enqueue_many([{"key": f"s{n}"} for n in range(4)])

    worker = worker_process("--burst")
    code, _ = wait_exit(worker, timeout=30)
    assert code == 0, log_text(worker)

    assert job_states() == {"done": 8}
    results = [ops.get_job(r.id)["result"] for r in async_jobs]
    assert {r["key"] for r in results} == {"a0", "a1", "a2", "a3"}
    assert {r["pid"] for r in results} == {worker.pid}  # ran in the worker process, not here
    # One event loop ran the four coroutines concurrently: all began before any finished.
    assert max(r["started"] for r in results) < min(r["finished"] for r in results)
    assert set(Effect.objects.values_list("key", "pid")) == {(f"s{n}", worker.pid) for n in range(4)}
    assert {ops.get_job(r.id)["result"] for r in sync_jobs} == {"s0", "s1", "s2", "s3"}
    assert_stopped_with(worker, claimed=8, settled=8, interrupted=0, lost=0)
