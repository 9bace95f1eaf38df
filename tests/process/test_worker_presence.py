"""A real jobs_worker process appears in ops.workers() while it runs and leaves on SIGTERM; a
killed one is shown presumed dead one visibility timeout after its last heartbeat."""

from __future__ import annotations

import signal

import pytest

from tests.cli import cli
from tests.conftest import wait_for
from ultimate_jobs import ops

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]


def test_a_worker_registers_and_leaves_on_sigterm(worker_process) -> None:
    proc = worker_process("--queues", "default,other", "--concurrency", "3", "--roles", "worker")
    (row,) = wait_for(ops.workers, timeout=30)  # type: ignore[misc]
    assert row["pid"] == proc.pid and row["queues"] == ["default", "other"] and row["slots"] == 3
    proc.signal(signal.SIGTERM)
    assert proc.wait(30) == 0, proc.output()
    assert ops.workers() == []


def test_a_killed_worker_is_shown_presumed_dead_once_its_heartbeat_is_older_than_the_visibility_timeout(
        worker_process) -> None:
    proc = worker_process("--roles", "worker", env={"JOBS_TEST_VISIBILITY": "1s"})
    (alive,) = wait_for(ops.workers, timeout=30)  # type: ignore[misc]
    assert (alive["pid"], alive["status"]) == (proc.pid, "alive")
    proc.kill()  # SIGKILL: nothing deletes its row
    wait_for(lambda: [w["status"] for w in ops.workers()] == ["presumed-dead"], timeout=10)
    (dead,) = ops.workers()
    assert dead["id"] == alive["id"] and dead["last_heartbeat_age"] >= 1.0
    code, out, _ = cli("workers")
    assert code == 0 and "presumed-dead" in out and alive["id"] in out
