"""``python manage.py jobs health [--json] [--worker PREFIX]``: exit 0 when the jobs databases answer
and the workers are alive, 1 with the reason otherwise; presumed-dead workers never count as alive.

The worker rows are planted (``WorkerHeartbeat``, what a worker's presence writes); a real worker
killed and cut off is in tests/process/test_second_cluster.py and test_worker_health.py."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from datetime import timedelta

import pytest

from tests.cli import cli
from ultimate_jobs import clock
from ultimate_jobs.models import WorkerHeartbeat

pytestmark = pytest.mark.django_db(transaction=True)
HOST = socket.gethostname()


def plant(worker_id: str, *, pid: int, alive: bool, host: str = HOST, started_ago: float = 60.0,
          beat_ago: float | None = None) -> None:
    now = clock.now()
    beat = now - timedelta(seconds=beat_ago if beat_ago is not None else (1.0 if alive else 120.0))
    WorkerHeartbeat.objects.create(id=worker_id, host=host, pid=pid, queues=["default"], slots=2, in_flight=[],
                                   started_at=now - timedelta(seconds=started_ago), last_heartbeat_at=beat,
                                   expires_at=now + timedelta(seconds=30) if alive else beat + timedelta(seconds=30))


def health(*args: str) -> tuple[int, dict]:
    code, out, err = cli("health", "--json", *args)
    return code, json.loads(out)


def gone_pid() -> int:
    """The pid of a process that ran and exited: nothing runs under it now."""
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    return int(proc.stdout)


def test_healthy_with_no_worker_answers_every_database() -> None:
    code, report = health()
    assert code == 0
    assert report["ok"] is True and report["reasons"] == []
    assert report["databases"] == [{"alias": "default", "ok": True, "error": None}]
    assert report["workers"] == [] and report["host"] == HOST


def test_worker_prefix_needs_a_live_worker_and_a_presumed_dead_one_does_not_count() -> None:
    code, report = health("--worker", "pod-a")
    assert code == 1
    assert report["reasons"] == ["no live worker whose id or host starts with 'pod-a'"]
    plant("pod-a:41:aaaaaa", pid=41, alive=False, host="pod-a")
    code, report = health("--worker", "pod-a")
    assert code == 1
    assert [w["verdict"] for w in report["workers"]] == ["presumed-dead"]
    assert "1 presumed dead" in report["reasons"][0]
    plant("pod-a:42:bbbbbb", pid=42, alive=True, host="pod-a")
    code, report = health("--worker", "pod-a")
    assert code == 0, report
    assert sorted(w["id"] for w in report["workers"]) == ["pod-a:41:aaaaaa", "pod-a:42:bbbbbb"]
    code, _ = health("--worker", "pod-b")  # another prefix is not served by pod-a's worker
    assert code == 1


def test_a_stuck_worker_on_this_host_fails_the_probe_and_a_gone_one_does_not() -> None:
    plant(f"{HOST}:gone:cccccc", pid=gone_pid(), alive=False)
    code, report = health()
    assert code == 0, report
    assert [w["verdict"] for w in report["workers"]] == ["gone"]
    # A row whose process still runs here (this test's own pid) with no fresh heartbeat: stuck.
    plant(f"{HOST}:{os.getpid()}:dddddd", pid=os.getpid(), alive=False, beat_ago=95.0)
    code, report = health()
    assert code == 1
    assert report["reasons"] == [f"worker {HOST}:{os.getpid()}:dddddd on this host is stuck: its process runs but "
                                 "its last heartbeat was 95s ago, past VISIBILITY_TIMEOUT"]
    code, out, _ = cli("health")  # the human form says the same, and why
    assert code == 1 and "UNHEALTHY" in out and "is stuck" in out


def test_a_row_replaced_by_a_newer_process_with_the_same_pid_is_not_stuck() -> None:
    # A restarted container: the old worker (same pid) left a row; the new one started after its last beat.
    plant(f"{HOST}:{os.getpid()}:old000", pid=os.getpid(), alive=False, started_ago=600, beat_ago=300)
    plant(f"{HOST}:{os.getpid()}:new000", pid=os.getpid(), alive=True, started_ago=10)
    code, report = health()
    assert code == 0, report
    assert sorted((w["id"][-6:], w["verdict"]) for w in report["workers"]) == [("new000", "alive"),
                                                                            ("old000", "replaced")]
