"""Real ``jobs_scheduler`` processes on PostgreSQL: one fire per occurrence across processes,
lease expiry mid-round, SIGTERM and abandoned rounds. Evidence is read from the database and from
each process's ``jobs.scheduler.fired`` log lines (the jobs stay ``ready``, where the live key
would hide a second insert, so the logs are what shows a double dispatch)."""

from __future__ import annotations

import os
import re
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta

import pytest
from django.db import connection

from tests.conftest import BACKEND, ROOT, WorkerProcess, wait_for
from tests.scheduling import set_watermark
from ultimate_jobs.models import Job, SchedulerLeader, SchedulerState
from ultimate_jobs.schedule.declarations import occurrence_ms

pytestmark = [pytest.mark.postgres_only, pytest.mark.process]

FIRED = re.compile(r"jobs\.scheduler\.fired task=(\S+) occurrence=(\S+) ")


# The suite's real-process wrapper (tests/conftest.py), run as jobs_scheduler by default.
SchedulerProcess = WorkerProcess


@pytest.fixture
def start(transactional_db: None) -> Iterator[Callable[..., SchedulerProcess]]:
    """``start(*args, faults=None, command="jobs_scheduler")``; every process is killed at teardown."""
    started: list[SchedulerProcess] = []

    def run(*args: str, faults: str | None = None, command: str = "jobs_scheduler") -> SchedulerProcess:
        env = {**os.environ, "JOBS_TEST_DB": BACKEND, "PYTHONPATH": str(ROOT), "JOBS_TEST_TASKS": "1",
               "JOBS_TEST_DB_NAME": str(connection.settings_dict["NAME"])}
        env.pop("ULTIMATE_JOBS_FAULTS", None)
        if faults:
            env["ULTIMATE_JOBS_FAULTS"] = faults
            env["ULTIMATE_JOBS_FAULTS_ARMED"] = "1"
        proc = SchedulerProcess(list(args), env, command=command)
        started.append(proc)
        return proc

    yield run
    for proc in started:
        proc.kill()


def db_now() -> datetime:
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        return cursor.fetchone()[0]


def fires(*procs: SchedulerProcess) -> Counter[tuple[str, str]]:
    """(task, occurrence) -> how many processes logged firing it."""
    return Counter(m.groups() for p in procs for m in FIRED.finditer(p.output()))


def lease() -> SchedulerLeader:
    return SchedulerLeader.objects.get(name="scheduler")


@pytest.mark.parametrize("count", [2, 5])
def test_schedulers_running_across_a_minute_boundary_fire_that_occurrence_once(start, count: int) -> None:
    procs = [start() for _ in range(count)]
    wait_for(lambda: all("jobs.scheduler.started" in p.output() for p in procs), timeout=30)
    armed = wait_for(lambda: SchedulerState.objects.filter(name="tests.every_minute").first(), timeout=30)
    boundary = (armed.watermark + timedelta(minutes=1)).replace(second=0, microsecond=0)
    wait_for(lambda: db_now() > boundary + timedelta(seconds=2), timeout=90, interval=0.5)
    key = f"tests.every_minute:{occurrence_ms(boundary)}:every_minute"
    wait_for(lambda: Job.objects.filter(idempotency_key=key).exists(), timeout=15)
    for proc in procs:
        proc.signal(signal.SIGTERM)
    assert [proc.wait(30) for proc in procs] == [0] * count
    logged = fires(*procs)
    assert logged[("tests.every_minute", boundary.isoformat())] == 1, logged
    assert all(n == 1 for n in logged.values()), logged
    assert Job.objects.filter(idempotency_key=key).count() == 1
    leaders = [p for p in procs if "jobs.scheduler.leading" in p.output()]
    assert len(leaders) >= 1
    assert SchedulerState.objects.get(name="tests.every_minute").fires == sum(
        n for (task, _), n in logged.items() if task == "tests.every_minute")


def test_a_leader_whose_lease_expires_mid_round_stops_and_the_next_leader_finishes(start) -> None:
    behind = db_now() - timedelta(minutes=10)
    set_watermark("tests.catch_a", behind)
    set_watermark("tests.catch_b", behind)
    first = start("--lease", "2s", faults="scheduler_after_fire=sleep:8")
    wait_for(lambda: "jobs.fault.struck point=scheduler_after_fire" in first.output(), timeout=30)
    second = start("--lease", "2s")
    wait_for(lambda: "stopped-dispatching" in first.output(), timeout=30)
    assert "jobs.scheduler.leadership-lost" in first.output()
    catch_b = Job.objects.filter(idempotency_key__startswith="tests.catch_b:")
    wait_for(lambda: catch_b.count() >= 3, timeout=15)
    for proc in (first, second):
        proc.signal(signal.SIGTERM)
    assert first.wait(30) == 0 and second.wait(30) == 0
    logged = fires(first, second)
    assert all(n == 1 for n in logged.values()), logged
    first_fired = {task for task, _ in fires(first)}
    assert first_fired == {"tests.catch_a"}  # it stopped before catch_b
    assert {occurrence for task, occurrence in fires(second) if task == "tests.catch_b"} >= {
        occurrence for task, occurrence in logged if task == "tests.catch_b"}
    assert sum(1 for task, _ in logged if task == "tests.catch_b") >= 3


def test_sigterm_finishes_the_round_then_hands_the_lease_over(start) -> None:
    behind = db_now() - timedelta(minutes=10)
    set_watermark("tests.catch_a", behind)
    set_watermark("tests.catch_b", behind)
    first = start(faults="scheduler_after_fire=sleep:2")
    wait_for(lambda: "jobs.fault.struck point=scheduler_after_fire" in first.output(), timeout=30)
    first.signal(signal.SIGTERM)  # mid-round: catch_a is committed, catch_b is still to come
    assert first.wait(30) == 0
    out = first.output()
    assert {task for task, _ in fires(first)} >= {"tests.catch_a", "tests.catch_b"}  # the round finished
    assert "jobs.scheduler.released" in out
    assert out.index("jobs.scheduler.released") > out.rindex("fired task=")
    assert lease().expires_at <= db_now()
    taken_at = time.monotonic()
    second = start()  # its default 30 s lease would block a takeover for 30 s had the lease not been released
    wait_for(lambda: "jobs.scheduler.leading" in second.output(), timeout=20)
    assert time.monotonic() - taken_at < 15
    second.signal(signal.SIGTERM)
    assert second.wait(30) == 0
    assert all(n == 1 for n in fires(first, second).values())


def test_an_abandoned_round_does_not_release_the_lease(start) -> None:
    set_watermark("tests.catch_a", db_now() - timedelta(minutes=10))
    first = start("--lease", "6s", "--drain-timeout", "1s", faults="scheduler_after_fire=sleep:60")
    wait_for(lambda: "jobs.fault.struck point=scheduler_after_fire" in first.output(), timeout=30)
    first.signal(signal.SIGTERM)
    assert first.wait(30) == 1
    out = first.output()
    assert "jobs.scheduler.drain-abandoned" in out and "jobs.scheduler.released" not in out
    held = lease()
    assert held.holder in out and held.expires_at > db_now()  # left to lapse, not handed over mid-round
    assert Job.objects.filter(idempotency_key__startswith="tests.catch_a:").count() == 3  # committed before
    second = start("--lease", "6s")
    wait_for(lambda: "jobs.scheduler.leading" in second.output(), timeout=30)
    assert lease().holder != held.holder and db_now() >= held.expires_at
    second.signal(signal.SIGTERM)
    assert second.wait(30) == 0
    assert all(n == 1 for n in fires(first, second).values())


def test_jobs_worker_runs_the_scheduler_role_and_its_jobs(start) -> None:
    set_watermark("tests.catch_a", db_now() - timedelta(minutes=10))
    worker = start("--queues", "default", command="jobs_worker")
    done = Job.objects.filter(idempotency_key__startswith="tests.catch_a:", state="done")
    wait_for(lambda: done.count() >= 3, timeout=30)
    worker.signal(signal.SIGTERM)
    assert worker.wait(60) == 0
    assert "jobs.scheduler.released" in worker.output()
    assert sorted(done.values_list("result", flat=True))[:3] == ["catch_a"] * 3
