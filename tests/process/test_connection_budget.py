"""The connection budget of docs/deployment.md, checked against ``pg_stat_activity``: a real
``jobs_worker`` process with the default roles (worker, scheduler, relay) on one database holds
``concurrency + 5`` connections once every body thread has touched the database — the claim loop,
its LISTEN, the relay, the relay's LISTEN, the scheduler, one per body thread — and one more, the
owed-wake sender, only for a second after a burst of enqueues."""

from __future__ import annotations

import signal
import time

import pytest
from django.db import connection

from tests.app.jobs import record
from tests.app.models import Effect
from tests.process.conftest import Start, wait_exit, wait_until
from tests.support.routing import PROCESS_TIMEOUT

pytestmark = [pytest.mark.process, pytest.mark.postgres_only]

# Beside the body threads: the claim loop and its LISTEN, the relay and its LISTEN, the scheduler.
ROLE_CONNECTIONS = {"worker": 2, "relay": 2, "scheduler": 1}


def budget(concurrency: int, roles: str) -> int:
    """docs/deployment.md's formula for one worker process on one database."""
    return concurrency + sum(ROLE_CONNECTIONS[role] for role in roles.split(","))


def backends() -> int:
    """Sessions on the suite's test database other than this test's own."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND pid <> pg_backend_pid()")
        return int(cursor.fetchone()[0])


@pytest.mark.parametrize(("concurrency", "roles"), [(2, "worker,scheduler,relay"), (6, "worker,scheduler,relay"),
                                                     (3, "worker"), (3, "worker,relay")])
def test_a_worker_process_holds_the_connections_the_formula_says(concurrency: int, roles: str,
                                                                 started_worker: Start) -> None:
    # A server session another test left (a pooler's, a worker's) ends on its own: wait for it.
    wait_until(lambda: backends() == 0, timeout=10, what="no session on the test database but this test's")
    worker = started_worker("--concurrency", str(concurrency), "--roles", roles)
    # Every body thread runs one job at the same time, so each opens its own connection.
    keys = [f"budget-{concurrency}-{n}" for n in range(concurrency)]
    record.enqueue_many([{"key": key, "sleep": 1.0} for key in keys])
    peak = 0
    deadline = time.monotonic() + PROCESS_TIMEOUT
    while Effect.objects.filter(key__in=keys).count() < len(keys):
        peak = max(peak, backends())
        assert time.monotonic() < deadline, "the jobs did not run"
        time.sleep(0.05)
    time.sleep(2.5)  # past the owed-wake sender's linger (1s) and a heartbeat: the steady state
    steady = [backends() for _ in range(5)]
    expected = budget(concurrency, roles)
    print(f"\nconcurrency={concurrency} roles={roles}: steady {steady}, peak {max(peak, *steady)}, formula {expected}")
    assert steady == [expected] * 5
    assert max(peak, *steady) <= expected + 1  # + the owed-wake sender, for a second
    worker.signal(signal.SIGTERM)
    code, _ = wait_exit(worker, PROCESS_TIMEOUT)
    assert code == 0
    wait_until(lambda: backends() == 0, timeout=10, what="every session closed with the process")
