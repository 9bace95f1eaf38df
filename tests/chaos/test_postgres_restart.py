"""PostgreSQL restarted (``pg_ctlcluster ... restart -m immediate``: a crash and recovery) while
two real workers process a few thousand jobs: the workers log the failures, back off, reconnect
(the claim loop, every body thread, the LISTEN session) and every job finishes.

Execution is at-least-once: a restart between a body's committed effect and its ack re-runs that
body, so duplicate executions are measured and printed as a figure, not failed. What must hold:
every job ``done``, every job's effect present (nothing lost), both worker processes alive
throughout, both working again after each restart, and no job left waiting for its lease (a
claim committed as the server went down, its answer lost, is reconciled by its worker at once:
``jobs.claim.reconciled``).

Tunables: ``JOBS_CHAOS_JOBS`` (4000), ``JOBS_CHAOS_RESTARTS`` (2).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections import Counter

import pytest
from django.db.models import Count, Max

from tests.app.jobs import chaos_effect
from tests.app.models import Effect
from tests.chaos.conftest import Cluster, reconnecting
from tests.process.conftest import Start, log_text, tail
from ultimate_jobs.models import Job

pytestmark = [pytest.mark.process, pytest.mark.postgres_only]

TOTAL = int(os.environ.get("JOBS_CHAOS_JOBS", "4000"))
RESTARTS = int(os.environ.get("JOBS_CHAOS_RESTARTS", "2"))
EVENTS = ("jobs.worker.tick-failed", "jobs.worker.settle-failed", "jobs.rescue.failed", "jobs.heartbeat.failed",
          "jobs.listen.lost", "jobs.attempt.failed", "jobs.worker.presence-failed", "jobs.settle.unowned",
          "jobs.lease.rescued", "jobs.claim.reconciled")


def done_count() -> int:
    return reconnecting(lambda: Job.objects.filter(name="tests.chaos.effect", state="done").count())  # type: ignore[return-value]


def test_a_postgres_restart_under_load_loses_no_job(started_worker: Start, cluster: Cluster,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    workers = (started_worker(), started_worker())
    pids = [w.pid for w in workers]
    begin = time.monotonic()
    inputs = [{"key": f"c{n:05d}", "sleep": 0.01} for n in range(TOTAL)]
    results = [r for start in range(0, TOTAL, 10_000) for r in chaos_effect.enqueue_many(inputs[start:start + 10_000])]
    assert len({r.id for r in results}) == TOTAL

    restarts: list[dict[str, float]] = []
    for n in range(RESTARTS):
        # Strike while the load is in full flow: after some jobs finished, with plenty left.
        target = TOTAL * (n + 1) // (RESTARTS + 2)
        deadline = time.monotonic() + 120
        while done_count() < target:
            assert time.monotonic() < deadline, f"load stalled below {target} done before restart {n + 1}"
            time.sleep(0.05)
        at_strike = done_count()
        struck = time.monotonic()
        took = cluster.restart()
        reconnecting(lambda: Job.objects.exists())
        back = time.monotonic()
        # Working again: more jobs finish after the server came back.
        at_back = done_count()
        while done_count() <= at_back + 20 and done_count() < TOTAL:
            assert time.monotonic() < back + 90, "no job finished within 90s of the restart"
            time.sleep(0.05)
        restarts.append({"done_at_strike": at_strike, "restart_s": round(took, 2),
                         "db_back_s": round(back - struck, 2),
                         "flowing_again_s": round(time.monotonic() - struck, 2)})

    deadline = time.monotonic() + 300
    while (done := done_count()) < TOTAL:
        if time.monotonic() > deadline:
            states = Counter(Job.objects.values_list("state", flat=True))
            raise AssertionError(f"only {done}/{TOTAL} done after the restarts: {states}\n"
                                 + "\n".join(tail(w, 30) for w in workers))
        for w in workers:
            assert w.proc.poll() is None, f"worker {w.pid} exited:\n{tail(w)}"
        time.sleep(0.1)
    elapsed = time.monotonic() - begin

    # Nothing lost: every job done, every job's effect committed at least once.
    states = Counter(Job.objects.filter(name="tests.chaos.effect").values_list("state", flat=True))
    assert states == {"done": TOTAL}, states
    per_key = dict(Effect.objects.values_list("key").annotate(n=Count("id")))
    assert set(per_key) == {f"c{n:05d}" for n in range(TOTAL)}
    duplicates = sum(n - 1 for n in per_key.values())
    twice = sum(1 for n in per_key.values() if n > 1)
    max_attempt = Job.objects.aggregate(m=Max("attempt"))["m"]
    retried = Job.objects.filter(attempt__gt=1).count()

    # The same two processes did it all, and each was working again after the last restart.
    for w in workers:
        assert w.proc.poll() is None, tail(w)
    assert set(Effect.objects.values_list("pid", flat=True)) <= set(pids)
    events = {w.pid: {e: log_text(w).count(e) for e in EVENTS if e in log_text(w)} for w in workers}
    for w in workers:
        text = log_text(w)
        noticed = ("jobs.worker.tick-failed", "jobs.worker.settle-failed", "jobs.heartbeat.failed")
        assert any(e in text for e in noticed), f"worker {w.pid} never noticed the restart:\n{tail(w)}"
        assert "retry_in=" in text  # it backed off
        assert "jobs.listen.lost" in text  # and its LISTEN session re-dialled
        # No worker died, so no job waited for its lease to lapse: a claim that committed as the
        # server went down, its answer lost, was handed back by the worker itself (reconciled).
        assert "jobs.lease.rescued" not in text, tail(w)
    backoffs = [float(x) for w in workers for x in re.findall(r"retry_in=([0-9.]+)s", log_text(w))]

    figures = {"jobs": TOTAL, "restarts": restarts, "elapsed_s": round(elapsed, 1),
               "jobs_per_s": round(TOTAL / elapsed, 1), "done": TOTAL, "duplicate_executions": duplicates,
               "jobs_run_twice_or_more": twice, "jobs_with_attempt_gt_1": retried, "max_attempt": max_attempt,
               "max_backoff_s": max(backoffs), "worker_events": events}
    with capsys.disabled():
        print("\nchaos figures: " + json.dumps(figures, indent=1))
    report = os.environ.get("JOBS_CHAOS_REPORT")
    if report:
        with open(report, "w") as out:
            json.dump(figures, out, indent=1)
