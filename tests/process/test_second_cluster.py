"""Blips heal, against a real second PostgreSQL cluster (``QUEUE_DATABASES``) and real cuts.

One ``jobs_worker`` process (default roles) serves ``default`` on the suite's database and
``emails`` on a second cluster (tests/support/clusters.py). Restarting that cluster while routed
jobs are staged in the outbox and running, and terminating every backend the worker holds on the
suite's database, are survived without a worker restart: every job done exactly once, the staged
rows relayed after the return, ``jobs stats`` and ``jobs health`` reading both databases.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest
from django.db import connection, transaction

from tests.app.jobs import record
from tests.app.models import Effect
from tests.conftest import BACKEND, ROOT
from tests.process.conftest import wait_exit, wait_started, wait_until
from tests.support.clusters import ALIAS, SecondCluster
from tests.support.routing import PROCESS_TIMEOUT
from ultimate_jobs.models import Job, OutboxEntry

pytestmark = [pytest.mark.process, pytest.mark.postgres_only, pytest.mark.django_db(transaction=True)]

DOWN = float(os.environ.get("JOBS_TEST_CLUSTER2_DOWN", "1.0"))  # seconds the cluster stays stopped
ROUTED_KEYS = "SELECT payload->>'key', state, attempt FROM ultimate_jobs_job WHERE payload->>'key' LIKE %s"


@pytest.fixture
def routed_to_cluster(second_cluster: SecondCluster) -> SecondCluster:
    """The second cluster, emptied for this test. The route (``emails`` to it) is the worker
    processes' (``SecondCluster.env``): this process stages jobs of ``emails`` in the outbox of
    ``default``, where a routed queue's staged rows wait, and their relay publishes them there."""
    second_cluster.rows("TRUNCATE ultimate_jobs_job, ultimate_jobs_outboxentry, ultimate_jobs_workerheartbeat")
    return second_cluster


def stage_mail(prefix: str, count: int, sleep: float = 0.0) -> list[str]:
    """Stage ``count`` routed jobs in the outbox of ``default`` (one transaction): the relay
    publishes them into the second cluster."""
    keys = [f"{prefix}-{n}" for n in range(count)]
    with transaction.atomic():
        for key in keys:
            assert record.using(queue="emails").enqueue(key=key, sleep=sleep).staged
    return keys


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``python -m django <args>`` against the suite's database, as an operator would run it."""
    full = {**os.environ, "JOBS_TEST_DB": BACKEND, "JOBS_TEST_DB_NAME": str(connection.settings_dict["NAME"]),
            "PYTHONPATH": str(ROOT), **env}
    command = [sys.executable, "-m", "django", args[0], "--settings", "tests.settings", *args[1:]]
    return subprocess.run(command, cwd=ROOT, env=full, capture_output=True, text=True, timeout=120)


def effects_once(keys: list[str]) -> bool:
    """Every key's body ran, and exactly once."""
    counts = {key: 0 for key in keys}
    for key in Effect.objects.filter(key__in=keys).values_list("key", flat=True):
        counts[key] += 1
    assert max(counts.values()) <= 1, {k: v for k, v in counts.items() if v > 1}
    return min(counts.values()) == 1


def test_a_routed_cluster_restart_with_jobs_staged_and_running_heals_without_a_worker_restart(
        routed_to_cluster: SecondCluster, worker_process: Any) -> None:
    cluster = routed_to_cluster
    env = cluster.env()
    worker = wait_started(worker_process("--queues", "default,emails", "--concurrency", "4", env=env))
    before = stage_mail("before", 12, sleep=0.4)
    wait_until(lambda: cluster.rows("SELECT count(*) FROM ultimate_jobs_job WHERE state = 'running'")[0][0] >= 2,
               timeout=PROCESS_TIMEOUT, procs=(worker,), what="routed jobs running on the second cluster")

    cluster.stop()  # routed jobs are running; others wait in the outbox and on the cluster
    down = stage_mail("down", 20)  # staged while the cluster is gone: the relay cannot publish them
    home = [r.id for r in record.enqueue_many([{"key": f"home-{n}"} for n in range(5)])]
    # Queues on the other database run on meanwhile.
    wait_until(lambda: effects_once([f"home-{n}" for n in range(5)]), timeout=PROCESS_TIMEOUT, procs=(worker,),
               what="default's jobs done while the second cluster is down")
    time.sleep(DOWN)  # the relay and the claim loop fail a few passes against the stopped cluster
    down_health = manage("jobs", "health", "--json", env=env)

    cluster.start()
    returned = time.monotonic()
    wait_until(lambda: cluster.rows("SELECT count(*) FROM ultimate_jobs_job WHERE payload->>'key' LIKE 'down-%%'")
               [0][0] > 0, timeout=PROCESS_TIMEOUT, procs=(worker,), what="a row staged meanwhile relayed")
    first_relayed = time.monotonic() - returned
    wait_until(lambda: effects_once(before + down), timeout=PROCESS_TIMEOUT, procs=(worker,),
               what="every routed job ran")
    wait_until(lambda: {s for _, s, _ in cluster.rows(ROUTED_KEYS, ("%-%",))} == {"done"}
               and len(cluster.rows(ROUTED_KEYS, ("%-%",))) == len(before + down),
               timeout=PROCESS_TIMEOUT, procs=(worker,), what="every routed job settled done on the second cluster")
    # Nothing published twice: one job per staged row, under the id it was staged with.
    staged = dict(OutboxEntry.objects.values_list("id", "job_id"))
    assert len(staged) == len(before + down) and all(staged.values())
    assert sorted(str(i) for (i,) in cluster.rows("SELECT id FROM ultimate_jobs_job")) == sorted(
        str(i) for i in staged)
    assert worker.proc.poll() is None  # the same process, never restarted
    assert set(Job.objects.filter(id__in=home).values_list("state", flat=True)) == {"done"}

    # The operator's view reads the routed cluster again: jobs stats (ops.overview included).
    stats = manage("jobs", "stats", "--json", env=env)
    assert stats.returncode == 0, stats.stderr
    data = json.loads(stats.stdout)
    emails = next(q for q in data["queues"] if q["queue"] == "emails")
    assert emails["done"] == len(before + down)
    assert "emails" in [q["queue"] for q in data["overview"]["queues"]]
    assert len({w["id"].rsplit(":", 1)[0] for w in data["overview"]["workers"]}) == 1  # one process, two loops
    up_health = manage("jobs", "health", "--json", env=env)
    assert down_health.returncode == 1, down_health.stdout
    assert [d["alias"] for d in json.loads(down_health.stdout)["databases"] if not d["ok"]] == [ALIAS]
    assert up_health.returncode == 0, up_health.stdout
    # The connection budget on the routed cluster (docs/deployment.md): the claim loop, its LISTEN,
    # the relay of its own outbox and that relay's LISTEN, and the relay of DATABASE publishing into it.
    time.sleep(2.5)  # past the owed-wake sender's linger
    on_cluster = cluster.rows("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                              (cluster.database,))[0][0]
    print(f"\nsessions of the worker on the routed cluster: {on_cluster}")
    assert on_cluster == 5

    worker.signal(signal.SIGTERM)
    code, _ = wait_exit(worker, PROCESS_TIMEOUT)
    assert code == 0, worker.output()
    print(f"\nsecond cluster back -> first relayed row: {first_relayed:.3f}s")
    assert first_relayed < 20  # the spec's bound is IDLE_POLL_MAX plus one back-off (5s): seconds, not minutes


def terminate_worker_backends() -> int:
    """``pg_terminate_backend`` every other session on the suite's test database (the worker's)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                       "WHERE datname = current_database() AND pid <> pg_backend_pid()")
        return int(cursor.fetchone()[0])


def test_terminating_every_worker_backend_on_the_jobs_database_heals_every_role(
        routed_to_cluster: SecondCluster, worker_process: Any) -> None:
    cluster = routed_to_cluster
    env = cluster.env()
    worker = wait_started(worker_process("--queues", "default,emails", "--concurrency", "3", env=env))
    running = [r.id for r in record.enqueue_many([{"key": f"run-{n}", "sleep": 0.5} for n in range(6)])]
    staged = stage_mail("cut-staged", 5, sleep=0.3)
    wait_until(lambda: Job.objects.filter(state="running").exists()
               and cluster.rows("SELECT count(*) FROM ultimate_jobs_job")[0][0] > 0,
               timeout=PROCESS_TIMEOUT, procs=(worker,), what="jobs running and the relay publishing")
    cut = terminate_worker_backends()
    # The claim loop, its listener, the relay and its listener, the scheduler, the bodies' threads.
    assert cut >= 5, cut
    after_home = [f"after-{n}" for n in range(6)]
    record.enqueue_many([{"key": key} for key in after_home])
    after_staged = stage_mail("after-staged", 5)
    keys = [f"run-{n}" for n in range(6)] + staged + after_home + after_staged
    wait_until(lambda: effects_once(keys), timeout=PROCESS_TIMEOUT, procs=(worker,),
               what="every job, before and after the cut, ran")
    # A second cut, idle this time: the worker keeps running jobs after it too.
    wait_until(lambda: not OutboxEntry.objects.filter(published_at__isnull=True).exists(), timeout=PROCESS_TIMEOUT,
               procs=(worker,), what="the outbox relayed")
    assert terminate_worker_backends() >= 3
    record.enqueue(key="after-second-cut")
    wait_until(lambda: effects_once(["after-second-cut"]), timeout=PROCESS_TIMEOUT, procs=(worker,),
               what="a job after the second cut ran")
    wait_until(lambda: set(Job.objects.filter(id__in=running).values_list("state", flat=True)) == {"done"},
               timeout=PROCESS_TIMEOUT, procs=(worker,), what="the jobs running at the cut settled done")
    assert {s for _, s, _ in cluster.rows(ROUTED_KEYS, ("%staged-%",))} == {"done"}
    assert worker.proc.poll() is None
    health = manage("jobs", "health", "--json", "--worker", worker_host_prefix(), env=env)
    assert health.returncode == 0, health.stdout + health.stderr
    worker.signal(signal.SIGTERM)
    code, _ = wait_exit(worker, PROCESS_TIMEOUT)
    assert code == 0, worker.output()


def worker_host_prefix() -> str:
    import socket

    return socket.gethostname()
