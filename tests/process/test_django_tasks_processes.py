"""Django tasks under a real ``manage.py jobs_worker`` process: it imports each task by module path,
runs it, survives a task's ``SystemExit``, and retries a flaky one; the results read back here."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conftest import WorkerProcess, wait_for
from tests.support import django_tasks as tasks
from ultimate_jobs.contrib.tasks.framework import TaskResultStatus

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
