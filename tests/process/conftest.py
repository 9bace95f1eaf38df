"""Helpers for the real-process tests: start a worker and wait until it claims, read the queue."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import WorkerProcess, wait_for

Start = Callable[..., WorkerProcess]  # the worker_process / started_worker fixtures


def log_text(proc: WorkerProcess) -> str:
    """The worker's stdout and stderr so far (readable after the process exited, too)."""
    return proc.log_path.read_text(errors="replace")


def tail(proc: WorkerProcess, lines: int = 40) -> str:
    return "\n".join(log_text(proc).splitlines()[-lines:])


def wait_until(predicate: Callable[[], Any], *, timeout: float, procs: tuple[WorkerProcess, ...] = (),
               what: str = "") -> Any:
    """``wait_for`` that names what it waited for and shows the workers' logs when it gives up."""
    try:
        return wait_for(predicate, timeout=timeout)
    except AssertionError:
        logs = "\n".join(f"--- worker pid={p.pid} rc={p.proc.poll()} ---\n{tail(p)}" for p in procs)
        raise AssertionError(f"not within {timeout}s: {what or predicate}\n{logs}") from None


def wait_started(proc: WorkerProcess, timeout: float = 30.0) -> WorkerProcess:
    """Wait for ``jobs.worker.started`` in the worker's log; fail at once if the process died first."""

    def started() -> bool:
        if proc.proc.poll() is not None:
            raise AssertionError(f"worker pid={proc.pid} exited with {proc.proc.returncode} before it "
                                 f"started:\n{tail(proc)}")
        return "jobs.worker.started" in log_text(proc)

    wait_until(started, timeout=timeout, procs=(proc,), what="jobs.worker.started")
    return proc


def wait_exit(proc: WorkerProcess, timeout: float) -> tuple[int, float]:
    """Wait for the process to exit; answer its exit code and how long it took."""
    begin = time.monotonic()
    deadline = begin + timeout
    while proc.proc.poll() is None:
        if time.monotonic() > deadline:
            raise AssertionError(f"worker pid={proc.pid} still running after {timeout}s:\n{tail(proc)}")
        time.sleep(0.01)
    return proc.wait(1), time.monotonic() - begin


def stop_counts(proc: WorkerProcess) -> dict[str, int]:
    """The counts on the worker's last ``worker stopped: claimed=N settled=N ...`` line."""
    line = next(line for line in reversed(log_text(proc).splitlines()) if line.startswith("worker stopped:"))
    # Only the key=N tokens: a non-zero lost= is followed by a sentence explaining it.
    return {key: int(value) for key, value in (part.split("=", 1) for part in line.split()[2:] if "=" in part)}


def assert_stopped_with(proc: WorkerProcess, **expected: int) -> None:
    """The worker's stop line reports ``expected`` (other counts it may add are not compared)."""
    counts = stop_counts(proc)
    assert {key: counts.get(key) for key in expected} == expected, counts


def job_states(**filters: Any) -> Counter[str]:
    from ultimate_jobs.models import Job

    return Counter(Job.objects.filter(**filters).values_list("state", flat=True))


@pytest.fixture
def started_worker(worker_process: Callable[..., WorkerProcess]) -> Callable[..., WorkerProcess]:
    """``started_worker(*args, env=None)``: a real ``jobs_worker`` that has logged ``jobs.worker.started``."""

    def start(*args: str, env: dict[str, str] | None = None) -> WorkerProcess:
        return wait_started(worker_process(*args, env=env))

    return start
