"""Two real worker processes drain one queue: every body runs exactly once, every job ends done."""

from __future__ import annotations

import signal
from collections import Counter

import pytest
from django.db.models import Count

from tests.app.jobs import record
from tests.app.models import Effect
from tests.conftest import WorkerProcess
from tests.process.conftest import Start, job_states, log_text, stop_counts, wait_exit, wait_until
from ultimate_jobs.models import Job

pytestmark = pytest.mark.process


def drain_with_two_workers(started_worker: Start, total: int, timeout: float) -> None:
    workers = (started_worker(), started_worker())
    results = record.enqueue_many([{"key": f"k{n:05d}"} for n in range(total)])
    assert len({r.id for r in results}) == total and not any(r.deduped for r in results)

    wait_until(lambda: job_states(name="tests.record")["done"] == total, timeout=timeout, procs=workers,
               what=f"{total} tests.record jobs done")

    # Exactly once, as a user counts it: one effect per key, written by attempt 1, no job run twice.
    per_key = Effect.objects.values("key").annotate(n=Count("id"))
    assert per_key.count() == total
    assert list(per_key.filter(n__gt=1)) == []
    assert Effect.objects.count() == total
    assert set(Effect.objects.values_list("attempt", flat=True)) == {1}
    assert set(Effect.objects.values_list("job_id", flat=True)) == {r.id for r in results}
    assert job_states() == {"done": total}
    assert set(Job.objects.values_list("attempt", flat=True)) == {1}
    assert Job.objects.filter(last_error__isnull=False).count() == 0
    # Both processes really took part (so the claim was contended), and no other process ran a body.
    pids = Counter(Effect.objects.values_list("pid", flat=True))
    assert set(pids) == {w.pid for w in workers}, pids

    for worker in workers:
        worker.signal(signal.SIGTERM)
    for worker in workers:
        code, _ = wait_exit(worker, timeout=15)
        assert code == 0, log_text(worker)
        assert "worker stopped:" in log_text(worker)
    assert sum(_claimed(w) for w in workers) == total


def _claimed(worker: WorkerProcess) -> int:
    counts = stop_counts(worker)
    assert counts["lost"] == 0 and counts["interrupted"] == 0, counts
    assert counts["claimed"] == counts["settled"], counts
    return counts["claimed"]


@pytest.mark.postgres_only
def test_two_workers_drain_2000_jobs_each_body_exactly_once(started_worker: Start) -> None:
    drain_with_two_workers(started_worker, 2000, timeout=60)


def test_two_workers_drain_200_jobs_each_body_exactly_once(started_worker: Start) -> None:
    drain_with_two_workers(started_worker, 200, timeout=45)
