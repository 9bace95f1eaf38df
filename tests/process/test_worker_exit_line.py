"""After an operator cancels a job a real worker is running, the worker's exit line says what its
``lost=1`` means (a result not stored because the job was cancelled or reclaimed meanwhile) instead
of leaving the engineer to guess."""

from __future__ import annotations

import pytest

from tests.app.jobs import fleet_cancellable
from tests.app.models import Effect
from tests.conftest import wait_for
from ultimate_jobs import ops
from ultimate_jobs.models import Job

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]


def test_the_exit_line_explains_lost_after_an_operator_cancel(worker_process) -> None:
    planted = fleet_cancellable.enqueue(key="exit-line", seconds=4, obey=False)  # ignores the cancel
    worker = worker_process("--burst", "--queues", "default", env={"JOBS_TEST_VISIBILITY": "3s"})
    wait_for(lambda: Effect.objects.filter(key="start:exit-line").exists(), timeout=30)
    ops.cancel_job(planted.id, reason="operator says stop", by="oncall")
    assert worker.wait(60) == 0
    last = [line for line in worker.output().splitlines() if line.startswith("worker stopped:")][-1]
    assert "lost=1" in last and "cancelled or reclaimed" in last, last
    assert Job.objects.get(id=planted.id).state == "cancelled"
