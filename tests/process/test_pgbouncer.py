"""Real worker processes behind a real PgBouncer (tests/support/pgbouncer.py): transaction mode with
``"prepare_threshold": None`` runs every feature; prepared statements through it are named
``X_DB_PREPARED_STATEMENTS`` in the worker's log and in ``jobs doctor``; no session state is left
on the pool's server sessions; ``LISTEN_DATABASES`` gives LISTEN-speed pickup; without it the wake
probe says so and the worker polls.

Evidence is read from the database (directly, past the pooler), from each process's log, and from
fresh clients of the pooler itself.
"""

from __future__ import annotations

import contextlib
import json
import signal
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any, NamedTuple

import psycopg
import pytest
from django.db import connection

from tests.app.jobs import record
from tests.conftest import WorkerProcess
from tests.process.conftest import log_text, wait_exit, wait_started, wait_until
from tests.scheduling import set_watermark, task_jobs
from tests.support.pgbouncer import PgBouncer
from ultimate_jobs import clock
from ultimate_jobs.models import Job

pytestmark = [pytest.mark.postgres_only, pytest.mark.process]

TIMEOUT = 60.0


def pooler_env(bouncer: PgBouncer, **extra: str) -> dict[str, str]:
    return {"JOBS_TEST_POOLER_PORT": str(bouncer.port), **extra}


def run_command(worker_process: Any, env: dict[str, str], command: str, *args: str) -> tuple[int, str]:
    """A management command in its own process with ``env`` (through the pooler); its exit code and output."""
    proc: WorkerProcess = worker_process(*args, env=env, command=command)
    code, _ = wait_exit(proc, TIMEOUT)
    return code, proc.output()


def enqueue_through(worker_process: Any, env: dict[str, str], code: str) -> None:
    """Run ``code`` in ``manage.py shell`` through the pooler (``env``): its enqueues go through it."""
    status, output = run_command(worker_process, env, "shell", "-c", code)
    assert status == 0, output


def wait_log(proc: WorkerProcess, text: str, timeout: float = 20.0) -> str:
    return str(wait_until(lambda: next((line for line in log_text(proc).splitlines() if text in line), None),
                          timeout=timeout, procs=(proc,), what=text))


def pickup(job_id: Any) -> float:
    """Seconds from the job's insert to its claim, both by the database's clock."""
    job = Job.objects.get(id=job_id)
    assert job.started_at is not None
    return (job.started_at - job.created_at).total_seconds()


def states(prefix: str) -> list[str]:
    return list(Job.objects.filter(idempotency_key__startswith=prefix).order_by("idempotency_key")
                .values_list("state", flat=True))


class Held(NamedTuple):
    """A pooled server session a test client holds in a transaction."""

    pid: int
    channels: list[str]
    client: psycopg.Connection[Any]


def pooled_client(bouncer: PgBouncer) -> psycopg.Connection[Any]:
    return psycopg.connect(host="127.0.0.1", port=bouncer.port, user="postgres",
                           dbname=connection.settings_dict["NAME"], prepare_threshold=None)


def server_sessions(bouncer: PgBouncer) -> list[tuple[int, str, list[str]]]:
    """What a fresh pooled client finds on each of the pool's server sessions for this database:
    (pid, plan_cache_mode, channels listened to). Each client holds a transaction, so the pooler
    hands every one another server session, until all of those the pool holds are covered (never
    more clients than that: a pool at its size limit would make the next one wait)."""
    pids = set(bouncer.server_pids(connection.settings_dict["NAME"]))
    found, clients = [], []
    try:
        while len(clients) < len(pids) and not pids <= {pid for pid, _, _ in found}:
            client = pooled_client(bouncer)
            clients.append(client)
            row = client.execute("SELECT pg_backend_pid(), current_setting('plan_cache_mode'), "
                                 "array(SELECT pg_listening_channels())").fetchone()
            found.append((row[0], row[1], list(row[2])))
    finally:
        for client in clients:
            client.rollback()
            client.close()
    assert pids <= {pid for pid, _, _ in found}, ("some of the pool's server sessions are held elsewhere", pids, found)
    return found


def assert_no_session_state(bouncer: PgBouncer) -> None:
    found = server_sessions(bouncer)
    assert len({pid for pid, _, _ in found}) == len(found)  # one client per server session
    assert [(mode, channels) for _, mode, channels in found] == [("auto", [])] * len(found), found


@contextlib.contextmanager
def holding(bouncer: PgBouncer, wanted: Callable[[int, list[str]], bool]) -> Iterator[Held | None]:
    """Hold (in a transaction, so no other client gets it until the block ends) the first of the
    pool's server sessions for which ``wanted(pid, channels listened to)`` is true: fresh clients
    each hold a transaction, so the pool hands every one another of its server sessions, until one
    is wanted or each of those the pool holds was tried. Yield it, or None."""
    sessions = len(bouncer.server_pids(connection.settings_dict["NAME"]))
    clients: list[psycopg.Connection[Any]] = []
    try:
        for _ in range(sessions):
            client = pooled_client(bouncer)
            clients.append(client)
            pid, channels = client.execute("SELECT pg_backend_pid(), array(SELECT pg_listening_channels())").fetchone()
            if wanted(int(pid), list(channels)):
                for other in clients[:-1]:  # only that one stays held
                    other.rollback()
                    other.close()
                clients = [client]
                yield Held(int(pid), list(channels), client)
                return
        yield None
    finally:
        for client in clients:
            client.rollback()
            client.close()


@contextlib.contextmanager
def holding_the_workers_listen(bouncer: PgBouncer,
                               worker: WorkerProcess) -> Iterator[tuple[int, psycopg.Connection[Any]]]:
    """Hold the server session of the worker's LISTEN on ``ultimate_jobs`` before the listener gives
    it up (about a second after it is made, when its probe goes unheard through the pooler). Each
    ``WAKE_PROBE_INTERVAL`` it LISTENs again: another chance to win that race."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        with holding(bouncer, lambda _, channels: "ultimate_jobs" in channels) as held:
            if held is not None:
                yield held.pid, held.client
                return
        assert worker.proc.poll() is None, log_text(worker)
    raise AssertionError(f"the test never held the worker's LISTEN session in time\n{log_text(worker)}")


def channels_on(bouncer: PgBouncer, pid: int) -> list[str] | None:
    """The channels the server session ``pid`` listens to (None: the pool did not hand it out)."""
    with holding(bouncer, lambda got, _: got == pid) as held:
        return None if held is None else held.channels


def stop(proc: WorkerProcess) -> None:
    proc.signal(signal.SIGTERM)
    code, _ = wait_exit(proc, TIMEOUT)
    assert code == 0, proc.output()


def test_every_feature_runs_behind_a_transaction_pooler_and_the_unheard_wake_polls(
        pgbouncer, worker_process) -> None:
    set_watermark("tests.catch_a", clock.now() - timedelta(minutes=2))  # two occurrences due
    env = pooler_env(pgbouncer, JOBS_TEST_TASKS="1", JOBS_TEST_POLL_INTERVAL="500ms", JOBS_TEST_IDLE_POLL_MAX="20s")
    begun = time.monotonic()
    worker = wait_started(worker_process("--concurrency", "4", env=env))
    line = wait_log(worker, "jobs.wake.unverified alias=default listen_alias=default channel=ultimate_jobs:",
                    timeout=15)
    assert time.monotonic() - begun < 15
    assert "LISTEN_DATABASES" in line and "transaction-mode pooler" in line

    enqueue_through(worker_process, env, "\n".join([
        "from django.db import transaction",
        "from tests.app.jobs import fan_out, fleet_serial, record",
        "for i in range(5):",
        "    assert not record.enqueue(key=f'pooled-{i}').staged",
        "with transaction.atomic():",
        "    assert record.enqueue(key='pooled-staged').staged",  # the outbox: the relay role publishes it
        "fleet_serial.enqueue_many([{'key': f'slot-{i}', 'seconds': 0.1} for i in range(3)])",
        "fan_out.enqueue(key='fan', children=2)",  # enqueues in a transaction from a job body
    ]))
    wait_until(lambda: states("record:pooled") == ["done"] * 6 and states("serial:slot") == ["done"] * 3
               and states("record:fan-") == ["done"] * 2 and states("fan:") == ["done"]
               and len(task_jobs("tests.catch_a")) >= 2
               and {state for _, state in task_jobs("tests.catch_a")} == {"done"}, timeout=TIMEOUT, procs=(worker,),
               what="jobs, outbox rows, slots and cron ticks all done")

    # Unverified, the loop polls at POLL_INTERVAL (500ms) with no idle backoff (which would
    # reach 7.5s of waiting after 8s idle).
    for n in range(2):
        time.sleep(8)
        job = record.enqueue(key=f"idle-{n}")
        wait_until(lambda job=job: Job.objects.get(id=job.id).state == "done", timeout=TIMEOUT, procs=(worker,))
        assert pickup(job.id) < 3.0, log_text(worker)

    code, output = run_command(worker_process, env, "jobs", "doctor", "--json")
    checks = {c["name"]: c for c in json.loads(output[output.index("{"):])["checks"]}
    assert code != 0
    assert checks["wake"]["status"] == "failed" and "LISTEN_DATABASES" in checks["wake"]["detail"]
    assert checks["prepared-statements"]["status"] == "ok"
    stop(worker)
    assert "X_DB_PREPARED_STATEMENTS" not in log_text(worker)
    assert_no_session_state(pgbouncer)


def test_prepared_statements_through_a_transaction_pooler_are_named_and_leave_no_session_state(
        pgbouncer, worker_process) -> None:
    env = pooler_env(pgbouncer, JOBS_TEST_POOLER_PREPARE="1")
    # A short drain: settles keep failing on this setup, so SIGTERM would wait out the default 25s.
    worker = wait_started(worker_process("--concurrency", "2", "--drain-timeout", "2s", env=env))
    for n in range(20):
        record.enqueue(key=f"prep-{n}")
    line = wait_log(worker, "X_DB_PREPARED_STATEMENTS", timeout=TIMEOUT)
    assert "jobs.db.failing" in line and "prepare_threshold" in line
    code, output = run_command(worker_process, env, "jobs", "doctor", "--json")
    checks = {c["name"]: c for c in json.loads(output[output.index("{"):])["checks"]}
    assert code != 0
    assert checks["prepared-statements"]["status"] == "failed"
    assert "X_DB_PREPARED_STATEMENTS" in checks["prepared-statements"]["detail"]
    assert "prepare_threshold" in checks["prepared-statements"]["detail"]
    stop(worker)
    text = log_text(worker)
    # Once per streak of failed passes, never as an unexplained failure, and never taken for a value
    # the database refused (which would settle a job as failed): the jobs settle once the error clears.
    assert not [ln for ln in text.splitlines() if "prepared statement" in ln and "X_DB_PREPARED_STATEMENTS" not in ln]
    assert set(Job.objects.filter(idempotency_key__startswith="record:prep-").values_list("state", flat=True)) \
        <= {"ready", "running", "done"}
    assert_no_session_state(pgbouncer)


# The listener's UNLISTEN for a LISTEN that went through a transaction pooler must reach the server
# session it landed on. These hold that session in a transaction of the test's own, so it is busy
# when the listener gives its LISTEN up (after the unheard probe, or at SIGTERM).
LEFT_ON_ENV = {"JOBS_TEST_WAKE_PROBE_INTERVAL": "20s", "JOBS_TEST_POLL_INTERVAL": "500ms"}


def test_a_listen_left_on_a_busy_pooled_session_is_given_up_once_that_session_is_free(
        pgbouncer, worker_process) -> None:
    worker = wait_started(worker_process("--concurrency", "2", env=pooler_env(pgbouncer, **LEFT_ON_ENV)))
    with holding_the_workers_listen(pgbouncer, worker) as (pid, _):
        time.sleep(2.5)  # past the probe's verdict: its UNLISTEN found this session busy
    # Within the 20s until the next LISTEN, so a new LISTEN's own UNLISTEN cannot be what clears it.
    wait_until(lambda: channels_on(pgbouncer, pid) == [], timeout=5, procs=(worker,),
               what=f"server session {pid} no longer listening")
    stop(worker)
    assert "jobs.listen.left-behind" not in log_text(worker)
    assert_no_session_state(pgbouncer)


def test_a_stopping_worker_waits_for_its_listens_busy_pooled_session_then_names_it(
        pgbouncer, worker_process) -> None:
    env = pooler_env(pgbouncer, **LEFT_ON_ENV)
    worker = wait_started(worker_process("--concurrency", "2", env=env))
    with holding_the_workers_listen(pgbouncer, worker):
        worker.signal(signal.SIGTERM)
        time.sleep(1.0)  # inside the stopping listener's few seconds of retries
    code, _ = wait_exit(worker, TIMEOUT)
    assert code == 0, worker.output()
    assert "jobs.listen.left-behind" not in log_text(worker)
    assert_no_session_state(pgbouncer)

    # Held past those seconds: the worker still exits, and says which server session still listens.
    worker = wait_started(worker_process("--concurrency", "2", env=env))
    with holding_the_workers_listen(pgbouncer, worker) as (pid, client):
        worker.signal(signal.SIGTERM)
        code, _ = wait_exit(worker, TIMEOUT)
        (channels,) = client.execute("SELECT array(SELECT pg_listening_channels())").fetchone()
        client.execute("UNLISTEN *")  # the test's own cleanup, on the session it holds
        client.commit()
    assert code == 0, worker.output()
    assert "ultimate_jobs" in channels
    line = wait_log(worker, "jobs.listen.left-behind", timeout=1)
    assert f"server_pids=[{pid}]" in line and "channel=ultimate_jobs " in line and "LISTEN_DATABASES" in line
    assert_no_session_state(pgbouncer)


def test_listen_databases_pointing_at_a_direct_alias_wakes_the_worker_behind_the_pooler(
        pgbouncer, worker_process) -> None:
    env = pooler_env(pgbouncer, JOBS_TEST_LISTEN_DATABASES="default=direct", JOBS_TEST_POLL_INTERVAL="10s",
                     JOBS_TEST_IDLE_POLL_MAX="10s")
    worker = wait_started(worker_process("--concurrency", "2", env=env))
    assert "listen_alias=direct" in wait_log(worker, "jobs.wake.live", timeout=15)
    time.sleep(0.5)
    enqueue_through(worker_process, env, "\n".join([
        "import time",
        "from tests.app.jobs import record",
        "for i in range(3):",
        "    record.enqueue(key=f'woken-{i}')",
        "    time.sleep(1)",
    ]))
    wait_until(lambda: states("record:woken") == ["done"] * 3, timeout=TIMEOUT, procs=(worker,))
    ids = Job.objects.filter(idempotency_key__startswith="record:woken").values_list("id", flat=True)
    assert max(pickup(i) for i in ids) < 2.0  # the poll alone would take up to 10s
    code, output = run_command(worker_process, env, "jobs", "doctor", "--json")
    checks = {c["name"]: c for c in json.loads(output[output.index("{"):])["checks"]}
    assert checks["wake"]["status"] == "ok", checks["wake"]
    assert "jobs.wake.unverified" not in log_text(worker)
    stop(worker)
    assert_no_session_state(pgbouncer)


def test_a_session_mode_pooler_keeps_the_listen_and_the_wake_is_live(pgbouncer_session, worker_process) -> None:
    env = pooler_env(pgbouncer_session)
    worker = wait_started(worker_process("--concurrency", "2", env=env))
    wait_log(worker, "jobs.wake.live", timeout=15)
    job = record.enqueue(key="session-mode")
    wait_until(lambda: Job.objects.get(id=job.id).state == "done", timeout=TIMEOUT, procs=(worker,))
    stop(worker)
    assert "jobs.wake.unverified" not in log_text(worker)
