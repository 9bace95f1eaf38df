"""``ops.cancel_job`` on a job a real worker is running: the row reads ``cancelled`` at once, the
worker's next heartbeat finds the row no longer its own and sets the body's ``ctx.cancelled``,
the body's remaining effects never happen, and nothing the worker does afterwards (the fenced
settle of a body that returned anyway included) turns the row back. The worker carries on."""

from __future__ import annotations

import pytest

from tests.app.jobs import fleet_cancellable, record
from tests.app.models import Effect
from tests.process.conftest import Start, log_text, wait_until
from ultimate_jobs import ops
from ultimate_jobs.models import Job

pytestmark = pytest.mark.process

# Heartbeats every second, so a cancel reaches the body within about a second.
SHORT_LEASE = {"JOBS_TEST_VISIBILITY": "3s"}


def test_cancelling_a_running_job_stops_its_body_and_the_row_stays_cancelled(started_worker: Start) -> None:
    worker = started_worker(env=SHORT_LEASE)
    obeys = fleet_cancellable.enqueue(key="obeys", seconds=120)
    ignores = fleet_cancellable.enqueue(key="ignores", seconds=120, obey=False)
    both = (obeys.id, ignores.id)
    wait_until(lambda: Effect.objects.filter(key__in=("start:obeys", "start:ignores")).count() == 2,
               timeout=20, procs=(worker,), what="both bodies running")
    assert set(Job.objects.filter(id__in=both).values_list("state", flat=True)) == {"running"}

    for job_id in both:
        answer = ops.cancel_job(job_id, reason="runaway")
        assert (answer["state"], answer["stop_reason"]) == ("cancelled", "cancelled")

    # The cooperative body sees ctx.cancelled at the next heartbeat and stops at its check().
    wait_until(lambda: f"jobs.run.cancelled job_id={obeys.id}" in log_text(worker), timeout=20,
               procs=(worker,), what="the cooperative body stopped")
    # The one that ignores the cancel returns normally; its 'done' settle is fenced out.
    wait_until(lambda: f"jobs.settle.unowned job_id={ignores.id}" in log_text(worker), timeout=20,
               procs=(worker,), what="the ignoring body's settle refused")

    assert not Effect.objects.filter(key="after:obeys").exists()  # its remaining effect never happened
    assert Effect.objects.filter(key="after:ignores").count() == 1  # a body ignoring ctx.cancelled runs on
    for job_id in both:
        job = ops.get_job(job_id)
        assert (job["state"], job["stop_reason"], job["result"], job["attempt"]) == (
            "cancelled", "cancelled", None, 1), job
        assert "runaway" in job["last_error"]

    # The same worker keeps running other jobs, and the cancelled rows never run again.
    more = record.enqueue_many([{"key": f"after-cancel-{n}"} for n in range(5)])
    wait_until(lambda: Job.objects.filter(id__in=[r.id for r in more], state="done").count() == len(more),
               timeout=20, procs=(worker,), what="jobs enqueued after the cancel done")
    ran_in = set(Effect.objects.filter(key__startswith="after-cancel-").values_list("pid", flat=True))
    assert ran_in == {worker.pid}
    assert worker.proc.poll() is None
    assert Effect.objects.filter(key__in=("start:obeys", "start:ignores")).count() == 2
    assert set(Job.objects.filter(id__in=both).values_list("state", flat=True)) == {"cancelled"}
