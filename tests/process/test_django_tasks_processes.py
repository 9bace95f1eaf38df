"""Django tasks under a real ``manage.py jobs_worker`` process: it imports each task by module path,
runs it, survives a task's ``SystemExit``, and retries a flaky one; an ``async def`` task's durable
steps replay, and a drain cancels it at its await; the results read back here."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable

import pytest

from tests.conftest import WorkerProcess, wait_for
from tests.support import django_tasks as tasks
from ultimate_jobs import ops
from ultimate_jobs.contrib.tasks.framework import TaskResultStatus
from ultimate_jobs.models import Job

pytestmark = pytest.mark.process


def test_a_worker_process_runs_tasks_and_survives_a_system_exit(worker_process: Callable[..., WorkerProcess]) -> None:
    exited = tasks.exits.enqueue(2)
    summed = tasks.calculate.enqueue(20, 22, label="answer")
    mailed = tasks.send_email.using(priority=100).enqueue("grace@example.com")
    flaky = tasks.flaky.enqueue(1, "in-process")
    worker = worker_process("--queues", "default,emails", "--concurrency", "1")
    results = (exited, summed, mailed, flaky)

    def finished() -> bool:
        for result in results:
            result.refresh()
        return all(result.is_finished for result in results)

    wait_for(finished, timeout=60)
    assert worker.proc.poll() is None, worker.output()  # still running after the task's exit
    assert exited.status == TaskResultStatus.FAILED
    assert exited.errors[0].traceback.strip().endswith("SystemExit: 2")
    assert summed.return_value == {"label": "answer", "value": 42, "items": [20, 22]}
    assert mailed.return_value == "sent to grace@example.com"
    assert (flaky.status, flaky.return_value, len(flaky.errors), flaky.attempts) == (
        TaskResultStatus.SUCCESSFUL, "finally", 1, 2)
    assert len(set(summed.worker_ids + mailed.worker_ids)) == 1  # one process ran them


def test_a_worker_process_runs_an_async_task_whose_durable_steps_replay(
        worker_process: Callable[..., WorkerProcess]) -> None:
    result = tasks.async_durable.enqueue("in-process")
    worker_process("--queues", "default", "--concurrency", "1")
    wait_for(lambda: result.refresh() or result.is_finished, timeout=60)
    assert (result.status, result.attempts) == (TaskResultStatus.SUCCESSFUL, 2)
    assert result.return_value["charged"] == "charge-in-process"
    steps = ops.get_job(result.id)["steps"]
    assert [(s["name"], s["executions"]) for s in steps] == [("charge", 1), ("ship", 1)]  # replayed, not re-run


def test_sigterm_cancels_an_awaiting_async_task_and_drains_it_back_uncounted(
        worker_process: Callable[..., WorkerProcess]) -> None:
    result = tasks.async_long.enqueue(60)
    worker = worker_process("--queues", "default", "--concurrency", "1")
    wait_for(lambda: Job.objects.get(id=result.id).state == "running", timeout=30)
    worker.signal(signal.SIGTERM)
    began = time.monotonic()
    assert worker.wait(20) == 0, worker.output()
    assert time.monotonic() - began < 5  # cancelled at its await, not after 60 s
    row = Job.objects.get(id=result.id)
    assert (row.state, row.attempt) == ("ready", 0)
