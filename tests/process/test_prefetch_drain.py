"""Prefetch keeps the drain's promise: a worker draining short jobs claims past its slots, and on
SIGTERM every run it claimed either finished (counted once) or went back to ``ready`` uncounted,
its body never started; nothing is lost, dead-lettered or run twice."""

from __future__ import annotations

import signal
from collections import Counter

import pytest

from tests.app.jobs import record
from tests.app.models import Effect
from tests.process.conftest import Start, log_text, stop_counts, wait_exit, wait_until
from ultimate_jobs.models import Job

pytestmark = pytest.mark.process

JOBS = 400


def test_sigterm_mid_drain_hands_prefetched_runs_back_uncounted(started_worker: Start) -> None:
    keys = [f"pf-{n}" for n in range(JOBS)]
    record.enqueue_many([{"key": key, "sleep": 0.002} for key in keys])
    worker = started_worker("--concurrency", "2")
    # Past the ~40 bodies after which prefetch starts, well before the end.
    wait_until(lambda: Effect.objects.filter(key__startswith="pf-").count() >= 120, timeout=60,
               procs=(worker,), what="120 of the jobs done")
    worker.signal(signal.SIGTERM)
    code, _ = wait_exit(worker, timeout=30)
    assert code == 0, log_text(worker)

    rows = list(Job.objects.filter(name="tests.record").values_list("idempotency_key", "state", "attempt"))
    assert len(rows) == JOBS
    assert Counter((state, attempt) for _, state, attempt in rows).keys() <= {("done", 1), ("ready", 0)}
    ran = Counter(Effect.objects.filter(key__startswith="pf-").values_list("key", flat=True))
    done = {key.removeprefix("record:") for key, state, _ in rows if state == "done"}
    assert set(ran) == done and set(ran.values()) == {1}  # each body ran once, exactly the done ones
    assert JOBS > len(done) >= 120  # the signal came mid-drain
    counts = stop_counts(worker)
    assert counts["settled"] == len(done) and counts["lost"] == 0
    assert counts["claimed"] == counts["settled"] + counts["interrupted"]
