"""The worker's ``LISTEN`` connection killed on its own (a PgBouncer or firewall cutting one idle
session): the listener logs ``jobs.listen.lost``, re-dials with backoff and listens again, and
meanwhile the poll (``IDLE_POLL_MAX`` = 200 ms in tests/settings.py) still picks up a new job at
once. The worker's other connections are untouched and it never fails a claim over it."""

from __future__ import annotations

import time

import pytest
from django.db import connection

from tests.app.jobs import record
from tests.conftest import WorkerProcess
from tests.process.conftest import Start, log_text, wait_until
from ultimate_jobs.models import Job

pytestmark = [pytest.mark.process, pytest.mark.postgres_only]

LISTENING = """
SELECT pid FROM pg_stat_activity
 WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'LISTEN "ultimate_jobs";%'
"""  # the listener's last statement: LISTEN and the pid of the server session holding it, in one query


def listeners() -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(LISTENING)
        return [pid for pid, in cursor.fetchall()]


def terminate(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
        return bool(cursor.fetchone()[0])


def done_within(worker: WorkerProcess, key: str, timeout: float) -> float:
    """Enqueue one job; answer how long until it read ``done`` (fail past ``timeout``)."""
    begin = time.monotonic()
    result = record.enqueue(key=key)
    wait_until(lambda: Job.objects.filter(id=result.id, state="done").exists(), timeout=timeout,
               procs=(worker,), what=f"{key} done")
    return time.monotonic() - begin


def test_a_killed_listen_connection_is_redialled_and_the_poll_covers_the_gap(started_worker: Start) -> None:
    worker = started_worker()
    first = wait_until(listeners, timeout=20, procs=(worker,), what="the worker's LISTEN session")
    assert len(first) == 1, first  # the relay role listens on ultimate_jobs_outbox, not here
    done_within(worker, "warm", timeout=20)  # the claim loop's own connection is open now
    others = set(backends()) - set(first)  # the claim loop's, the relay's, ...

    assert terminate(first[0])
    # Enqueued at once: whether the listener is back yet or not, the job runs within the poll interval.
    waited = done_within(worker, "right-after-the-cut", timeout=3.0)

    wait_until(lambda: "jobs.listen.lost" in log_text(worker), timeout=10, procs=(worker,),
               what="the listener logged the lost connection")
    again = wait_until(lambda: [pid for pid in listeners() if pid != first[0]], timeout=10, procs=(worker,),
                       what="a new LISTEN session")
    assert len(again) == 1, again
    assert done_within(worker, "after-the-redial", timeout=3.0) < 3.0

    text = log_text(worker)
    lost = [line for line in text.splitlines() if "jobs.listen.lost" in line]
    assert len(lost) == 1 and "retry_in=" in lost[0], lost
    # Only the listener was cut: no claim or settle failed, the process is the same one.
    assert "jobs.worker.tick-failed" not in text and "jobs.worker.settle-failed" not in text, text[-3000:]
    assert worker.proc.poll() is None
    assert others <= set(backends()), (others, backends())  # every other session of the worker lives on
    assert waited < 3.0


def backends() -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                       "AND pid <> pg_backend_pid()")
        return [pid for pid, in cursor.fetchall()]
