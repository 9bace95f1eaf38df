"""consumer() under real worker processes: SIGKILL mid-batch loses and doubles nothing the
database holds; SIGTERM drains uncounted with the cursor on the last committed batch."""

from __future__ import annotations

import signal
from collections import Counter

import pytest

from tests.app.models import Effect
from tests.conftest import BACKEND
from tests.process.conftest import Start, wait_exit, wait_until
from tests.support import consumer_jobs
from tests.support.consumer_jobs import numbers
from ultimate_jobs import ops
from ultimate_jobs.models import Job

pytestmark = pytest.mark.process

ITEMS = 200
ENV = {"JOBS_TEST_MODULES": "tests.support.consumer_jobs", "TEST_CONSUMER_ITEMS": str(ITEMS),
       "TEST_CONSUMER_PAUSE": "0.15", "JOBS_TEST_VISIBILITY": "2s",
       # PostgreSQL: the pause is inside handle's transaction, so the kill lands mid-batch. SQLite has one
       # writer lock: a transaction held that long would starve the worker's own loop (see consumer_jobs).
       "TEST_CONSUMER_PAUSE_IN": "stream" if BACKEND == "sqlite" else "handle"}


def handled(key: str) -> Counter[int]:
    return Counter(int(k.rsplit(":", 1)[1]) for k in Effect.objects.filter(key__startswith=f"item:{key}:")
                   .values_list("key", flat=True))


def test_sigkill_mid_batch_resumes_from_the_committed_cursor_exactly_once(started_worker: Start) -> None:
    victim = started_worker(env=ENV)
    enqueued = numbers.enqueue(key="a")
    wait_until(lambda: consumer_jobs.load("a") >= 40, timeout=60, procs=(victim,), what="four batches committed")
    victim.kill()
    assert victim.proc.returncode == -signal.SIGKILL
    at_kill = consumer_jobs.load("a")
    assert at_kill < ITEMS
    assert sorted(handled("a")) == list(range(1, at_kill + 1))  # the batch in flight rolled back whole

    rescuer = started_worker(env=ENV)
    wait_until(lambda: Job.objects.filter(id=enqueued.id, state="done").exists(), timeout=90,
               procs=(rescuer,), what="the consumer run done on the second worker")
    counts = handled("a")
    assert sorted(counts) == list(range(1, ITEMS + 1)) and set(counts.values()) == {1}  # none lost, none twice
    job = ops.get_job(enqueued.id)
    assert job["attempt"] == 2  # the lapsed lease counts, as for any job
    assert job["result"] == {"key": "a", "batches": (ITEMS - at_kill) // 10, "items": ITEMS - at_kill}
    assert job["consumer"]["key"] == "a" and job["consumer"]["lag"] == 0


def test_sigterm_drains_uncounted_with_the_cursor_on_the_last_committed_batch(started_worker: Start) -> None:
    worker = started_worker(env=ENV)
    enqueued = numbers.enqueue(key="b")
    wait_until(lambda: consumer_jobs.load("b") >= 30, timeout=60, procs=(worker,), what="three batches committed")
    worker.proc.send_signal(signal.SIGTERM)
    code, _ = wait_exit(worker, timeout=30)
    assert code == 0
    row = Job.objects.get(id=enqueued.id)
    assert (row.state, row.attempt, row.error_code) == ("ready", 0, None)  # interrupted, not counted
    cursor = consumer_jobs.load("b")
    counts = handled("b")
    assert sorted(counts) == list(range(1, cursor + 1)) and set(counts.values()) == {1}

    finisher = started_worker(env={**ENV, "TEST_CONSUMER_PAUSE": "0"})
    wait_until(lambda: Job.objects.filter(id=enqueued.id, state="done").exists(), timeout=90,
               procs=(finisher,), what="the drained run finished by the next worker")
    counts = handled("b")
    assert sorted(counts) == list(range(1, ITEMS + 1)) and set(counts.values()) == {1}
    assert Job.objects.get(id=enqueued.id).attempt == 1
