"""What a real worker process takes: only job names registered in its own process, only its own
queues; and ``--burst`` exits 0 once nothing runnable is left."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.app.jobs import flaky, other_queue, record
from tests.app.models import Effect
from tests.process.conftest import Start, assert_stopped_with, job_states, log_text, wait_exit
from ultimate_jobs import NO_TENANT, ops
from ultimate_jobs.models import Job

pytestmark = pytest.mark.process


def assert_untouched(job_id: object) -> None:
    row = Job.objects.get(id=job_id)
    assert (row.state, row.attempt, row.claimed_by, row.claim) == ("ready", 0, None, None)
    assert (row.started_at, row.finished_at, row.last_error, row.stop_reason) == (None, None, None, None)


def test_a_worker_claims_only_job_names_registered_in_its_process(
        worker_process: Start, declare: Callable[..., object]) -> None:
    # A row written by a deployment whose code this worker does not have; first in claim order.
    now = timezone.now()
    orphan = Job.objects.create(name="billing.not_deployed_here", queue="default", priority=-10,
                                payload={"invoice_id": 7}, idempotency_key="invoice:7",
                                run_at=now - timedelta(minutes=1), created_at=now, updated_at=now)

    # A job declared only in this (the test) process, enqueued through the ordinary path.
    @declare(name="tests.process.declared_in_the_test_process_only", idempotency_key="{key}",
             tenant=NO_TENANT, priority=-5)
    def local_only(ctx: object, *, key: str) -> None:
        raise AssertionError("a worker process cannot have this job's code")

    local = local_only.enqueue(key="x")  # type: ignore[attr-defined]
    registered = record.enqueue_many([{"key": f"beside-{n}"} for n in range(20)])

    worker = worker_process("--burst")
    code, _ = wait_exit(worker, timeout=30)
    assert code == 0, log_text(worker)

    assert job_states(name="tests.record") == {"done": 20}
    assert Effect.objects.filter(key__startswith="beside-").count() == 20
    for unknown in (orphan.id, local.id):  # still queued, never discarded, no attempt burned
        assert_untouched(unknown)
    visible = {row["id"] for row in ops.list_jobs(state="ready")["jobs"]}
    assert visible == {str(orphan.id), str(local.id)}
    assert ops.get_job(orphan.id)["payload"] == {"invoice_id": 7}
    assert_stopped_with(worker, claimed=20, settled=20, interrupted=0, lost=0)
    assert {r.id for r in registered} == set(Job.objects.filter(state="done").values_list("id", flat=True))


def test_burst_exits_zero_once_nothing_is_runnable(worker_process: Start) -> None:
    record.enqueue_many([{"key": f"burst-{n}"} for n in range(30)])
    retried = flaky.enqueue(key="twice", failures=2)  # fails twice, retried at once (delay 0)
    later = record.using(delay="1h").enqueue(key="tomorrow")  # not runnable yet: must not hold burst open

    worker = worker_process("--burst")
    code, _ = wait_exit(worker, timeout=30)
    assert code == 0, log_text(worker)

    assert job_states(name="tests.record", state="done")["done"] == 30
    flaky_job = ops.get_job(retried.id)
    assert (flaky_job["state"], flaky_job["attempt"], flaky_job["result"]) == ("done", 3, {"succeeded_on": 3})
    assert_delayed = Job.objects.get(id=later.id)
    assert (assert_delayed.state, assert_delayed.attempt) == ("delayed", 0)
    assert_stopped_with(worker, claimed=33, settled=33, interrupted=0, lost=0)
    assert "jobs.worker.stopped" in log_text(worker)


def test_burst_on_an_empty_queue_exits_zero_at_once(worker_process: Start) -> None:
    worker = worker_process("--burst")
    code, took = wait_exit(worker, timeout=20)
    assert code == 0, log_text(worker)
    assert_stopped_with(worker, claimed=0, settled=0, interrupted=0, lost=0)
    assert took < 15


def test_a_worker_on_other_queues_does_not_take_default_jobs(worker_process: Start) -> None:
    on_default = record.enqueue(key="for-default")
    on_other = other_queue.enqueue(key="for-other")
    assert Job.objects.get(id=on_default.id).queue == "default"

    worker = worker_process("--queues", "other", "--burst")
    code, _ = wait_exit(worker, timeout=30)
    assert code == 0, log_text(worker)
    assert ops.get_job(on_other.id)["state"] == "done"
    assert_untouched(on_default.id)
    assert not Effect.objects.filter(key="for-default").exists()
    assert_stopped_with(worker, claimed=1, settled=1, interrupted=0, lost=0)

    # The default job was runnable all along: a worker on its queue takes it.
    default_worker = worker_process("--queues", "default", "--burst")
    code, _ = wait_exit(default_worker, timeout=30)
    assert code == 0, log_text(default_worker)
    assert ops.get_job(on_default.id)["state"] == "done"
