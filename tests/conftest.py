"""Shared fixtures: the backend under test, throwaway job declarations, real worker processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

from ultimate_jobs import Worker, clock, ops
from ultimate_jobs.registry import unregister as _unregister

ROOT = Path(__file__).resolve().parent.parent
BACKEND = settings.BACKEND
pytest_plugins = [
    "tests.scheduling",  # declare_task, frozen_at
    "tests.error_codes",  # --error-codes-report
    "tests.support.routing",  # routed, routed_env
    "tests.support.clusters",  # second_cluster
    "tests.support.http_receiver",  # receiver
    "tests.support.pgbouncer",  # pgbouncer, pgbouncer_session
]


def pytest_report_header(config: pytest.Config) -> str:
    return f"ultimate_jobs test database: {BACKEND}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if BACKEND == "postgres":
        return
    skip = pytest.mark.skip(reason="needs PostgreSQL (LISTEN/NOTIFY, SKIP LOCKED or EXPLAIN)")
    for item in items:
        if item.get_closest_marker("postgres_only"):
            item.add_marker(skip)


class Declared:
    """The declarations one test made (jobs, backfills, purges), forgotten when it ends."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def track(self, handle: Any) -> Any:
        self.names.append(handle.name)
        return handle

    def forget(self) -> None:
        for name in self.names:
            _unregister(name)


def _close_shared_thread_connections() -> None:
    import asyncio

    from asgiref.sync import sync_to_async
    from django.db import connections

    asyncio.run(sync_to_async(connections.close_all, thread_sensitive=True)())


@pytest.fixture
def shared_thread_connections_closed() -> Iterator[None]:
    """Code under ``asyncio.run`` (``aenqueue``, ``aget_result``) reaches the database through
    asgiref's one shared thread, whose Django connection outlives the test. It is closed before the
    test (another test may have left it open, and a test that terminates every other backend may
    have killed it since) and after."""
    _close_shared_thread_connections()
    yield
    _close_shared_thread_connections()


@pytest.fixture
def declared() -> Iterator[Declared]:
    tracker = Declared()
    yield tracker
    tracker.forget()


@pytest.fixture
def declare(declared: Declared) -> Callable[..., Callable[[Callable[..., object]], object]]:
    """``declare(**job_options)(fn)``: a job that exists for one test only."""
    from ultimate_jobs import job

    return lambda **options: lambda fn: declared.track(job(**options)(fn))


@pytest.fixture
def declare_backfill(declared: Declared) -> Callable[..., Any]:
    """``declare_backfill(**options)``: a backfill that exists for one test only (NO_TENANT and an
    unthrottled rate unless given)."""
    from ultimate_jobs import NO_TENANT, backfill

    return lambda **options: declared.track(backfill(**{"tenant": NO_TENANT, "rate": 1000, **options}))


@pytest.fixture
def make_worker() -> Iterator[Callable[..., Worker]]:
    """``make_worker(**options)``: an in-process ``Worker`` for this test, closed when the test ends so
    no body thread it started keeps a database connection open. A helper that runs a worker to the
    end owns it instead: ``with Worker(...) as worker: worker.run(install_signals=False)``."""
    built: list[Worker] = []

    def make(**options: Any) -> Worker:
        worker = Worker(**options)
        built.append(worker)
        return worker

    yield make
    for worker in built:
        worker.close(wait=5.0)


@pytest.fixture
def frozen_clock() -> Iterator[object]:
    """Freeze ultimate_jobs' clock (and so every SQL ``now``) at the current time."""
    clock.freeze(clock.now())
    yield clock
    clock.freeze(None)


class WorkerProcess:
    """A real ``manage.py jobs_worker`` (or ``jobs_relay``, ...) process against the suite's test database."""

    def __init__(self, args: list[str], env: dict[str, str], command: str = "jobs_worker") -> None:
        self.args = args
        log_dir = Path(os.environ.get("JOBS_TEST_LOGS", "/tmp/ultimate-jobs-test-logs"))
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"{command}-{os.getpid()}-{time.monotonic_ns()}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 (closed in wait/kill)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "django", command, "--settings", "tests.settings", "-v", "2", *args],
            cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def wait(self, timeout: float = 60) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            self._log.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self._log.close()

    def output(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")


@pytest.fixture
def worker_process(transactional_db: None) -> Iterator[Callable[..., WorkerProcess]]:
    """Start real worker processes that join this test's database; all are killed at teardown.

    ``command="jobs_relay"`` starts a relay instead of a worker.
    """
    # Every worker leads or joins the scheduler, and the built-in retention task fires at minute 17
    # of every hour: a test that straddles it would see a claim and a settle it never asked for.
    ops.pause_task("ultimate_jobs.retention", by="tests")
    started: list[WorkerProcess] = []

    def start(*args: str, env: dict[str, str] | None = None, command: str = "jobs_worker") -> WorkerProcess:
        full_env = {**os.environ, "JOBS_TEST_DB": BACKEND, "JOBS_TEST_DB_NAME": str(connection.settings_dict["NAME"]),
                    "PYTHONPATH": str(ROOT), **(env or {})}
        if full_env.get("ULTIMATE_JOBS_FAULTS"):  # a crash test's spec arms only with the second switch
            full_env.setdefault("ULTIMATE_JOBS_FAULTS_ARMED", "1")
        proc = WorkerProcess(list(args), full_env, command)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.kill()


def wait_for(predicate: Callable[[], object], timeout: float = 30.0, interval: float = 0.05) -> object:
    """Poll ``predicate`` until it answers something truthy; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s: {predicate}")
        time.sleep(interval)
