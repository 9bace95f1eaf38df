"""Leases under a fleet of real workers.

- A body that kills its own process on every attempt (``os._exit``: an OOM kill, a segfaulting
  extension) cannot take the fleet down with it or loop forever: each death leaves only a lease,
  the final lapse dead-letters it (``lease-lapsed``), and the other jobs on the queue keep flowing
  through the surviving and restarted workers meanwhile.
- A run that lasts longer than the visibility timeout, but whose worker heartbeats, is never
  reclaimed: one start, done at attempt 1.
"""

from __future__ import annotations

import time
from datetime import datetime

import pytest
from django.db.models import Count
from django.db.models.functions import Now

from tests.app.jobs import fleet_long, fleet_self_kill, record
from tests.app.models import Effect
from tests.conftest import WorkerProcess
from tests.process.conftest import Start, log_text, wait_started, wait_until
from ultimate_jobs import ops
from ultimate_jobs.models import Job

pytestmark = pytest.mark.process

SHORT_LEASE = {"JOBS_TEST_VISIBILITY": "2s"}  # heartbeats every ~0.67 s; a dead worker's job lapses ~2 s on
FLEET = 3


def test_a_body_that_kills_its_worker_every_time_is_dead_lettered_while_the_queue_keeps_flowing(
        worker_process: Start) -> None:
    fleet: list[WorkerProcess] = [wait_started(worker_process("--concurrency", "4", env=SHORT_LEASE))
                                  for _ in range(FLEET)]
    everyone: list[WorkerProcess] = list(fleet)
    bomb = fleet_self_kill.enqueue(key="bomb")
    assert Job.objects.get(id=bomb.id).max_attempts == 2

    # The supervisor: restart whichever worker died; meanwhile keep feeding the queue small jobs.
    deaths: list[tuple[int, int | None]] = []
    fed: list[str] = []
    batch = 0
    deadline = time.monotonic() + 60
    while not Job.objects.filter(id=bomb.id, state__in=("dead", "failed", "done")).exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"the bomb is still {Job.objects.get(id=bomb.id).state} after 60s, deaths="
                                 f"{deaths}\n" + "\n".join(log_text(p)[-2000:] for p in everyone))
        for n, proc in enumerate(fleet):
            if proc.proc.poll() is not None:
                deaths.append((proc.pid, proc.proc.returncode))
                fleet[n] = worker_process("--concurrency", "4", env=SHORT_LEASE)
                everyone.append(fleet[n])
        keys = [f"flow-{batch:03d}-{n}" for n in range(4)]
        record.enqueue_many([{"key": key, "sleep": 0.02} for key in keys])
        fed.extend(keys)
        batch += 1
        time.sleep(0.1)

    job = ops.get_job(bomb.id)
    assert (job["state"], job["stop_reason"], job["attempt"], job["error_code"]) == (
        "dead", "lease-lapsed", 2, "X_LEASE_LAPSED"), job
    assert "final attempt" in job["last_error"]
    # Each attempt killed the worker that ran it (and only those died), and no third attempt started.
    begun = list(Effect.objects.filter(key="start:bomb").order_by("attempt").values_list("attempt", "pid"))
    assert [attempt for attempt, _ in begun] == [1, 2], begun
    exited = {p.pid: p.proc.poll() for p in everyone if p.proc.poll() is not None}
    assert exited == {pid: 1 for _, pid in begun}, (exited, begun, deaths)  # os._exit(1), twice

    # The queue kept flowing: jobs were finished between the first death and the dead letter ...
    first_start = Effect.objects.values_list("created_at", flat=True).get(key="start:bomb", attempt=1)
    dead_at: datetime = Job.objects.values_list("finished_at", flat=True).get(id=bomb.id)
    flowed = Job.objects.filter(name="tests.record", finished_at__gt=first_start,
                                finished_at__lt=dead_at).count()
    assert flowed >= 10, (flowed, first_start, dead_at)
    print(f"bomb dead {(dead_at - first_start).total_seconds():.1f}s after its first start; "
          f"{flowed} other jobs finished meanwhile")
    # ... and every one of them finishes (those caught in a dying worker are reclaimed by their lease).
    fleet = [p for p in fleet if p.proc.poll() is None] or [worker_process(env=SHORT_LEASE)]
    wait_until(lambda: Job.objects.filter(name="tests.record", state="done").count() == len(fed), timeout=45,
               procs=tuple(fleet), what=f"all {len(fed)} jobs fed during the deaths done")
    assert set(Effect.objects.filter(key__startswith="flow-").values_list("key", flat=True)) == set(fed)
    assert Job.objects.get(id=bomb.id).state == "dead"
    assert Effect.objects.filter(key="start:bomb").count() == 2


def test_a_run_longer_than_its_lease_is_never_reclaimed_while_it_heartbeats(started_worker: Start) -> None:
    runner = started_worker(env=SHORT_LEASE)
    result = fleet_long.enqueue(key="marathon", seconds=7)  # 3.5 visibility windows, well inside timeout=120s
    wait_until(lambda: Effect.objects.filter(key="start:marathon").exists(), timeout=20, procs=(runner,),
               what="the long run started")
    rival = started_worker(env=SHORT_LEASE)  # would reclaim the job the moment its lease lapsed
    procs = (runner, rival)

    # While it runs, its lease always lies in the future on the database clock, and moves forward.
    leases: list[datetime] = []
    while Job.objects.filter(id=result.id, state="running").exists():
        live = Job.objects.filter(id=result.id, state="running").values_list("visible_at", Now()).first()
        if live is not None:
            visible_at, db_now = live
            assert visible_at > db_now, (visible_at, db_now)
            leases.append(visible_at)
        time.sleep(0.2)
        assert len(leases) < 300, "the long run did not finish within a minute"

    wait_until(lambda: Job.objects.filter(id=result.id, state="done").exists(), timeout=20, procs=procs,
               what="the long run done")
    job = ops.get_job(result.id)
    assert (job["state"], job["attempt"], job["result"]["pid"]) == ("done", 1, runner.pid), job
    assert len(set(leases)) >= 5, leases  # renewed by the heartbeat several times
    ledger = dict(Effect.objects.filter(key__endswith=":marathon").values_list("key").annotate(n=Count("id")))
    assert ledger == {"start:marathon": 1, "done:marathon": 1}
    for proc in procs:
        text = log_text(proc)
        assert "jobs.lease.rescued" not in text and "jobs.lease.lost" not in text, text[-2000:]
