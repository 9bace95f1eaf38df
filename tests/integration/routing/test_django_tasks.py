"""The django.tasks backend follows ``QUEUE_DATABASES``: a task on a routed queue is stored on the
routed database, a worker serving that queue runs it there, and ``get_result`` reads it back."""

from __future__ import annotations

import pytest

from tests.support import django_tasks as tasks
from tests.support.routing import ROUTED, raw
from ultimate_jobs.contrib.tasks.framework import TaskResultStatus, task_backends

pytestmark = [pytest.mark.postgres_only,
              pytest.mark.django_db(databases=["default", ROUTED], transaction=True)]


def test_a_task_on_a_routed_queue_runs_and_reads_back_from_its_database(routed, make_worker) -> None:
    tasks.CALLS.clear()
    result = tasks.send_email.enqueue("ada@example.com", password="hunter2-routed")
    # Stored where the route says, and nowhere else.
    assert raw(ROUTED, "SELECT id::text, queue, state FROM ultimate_jobs_job") == [(result.id, "emails", "ready")]
    assert raw("default", "SELECT count(*) FROM ultimate_jobs_job") == [(0,)]
    read = task_backends["default"].get_result(result.id)
    assert (read.id, read.status, read.args) == (result.id, TaskResultStatus.READY, ["ada@example.com"])

    make_worker(queues=["emails"], burst=True, worker_id="w-routed-task").run(install_signals=False)
    assert tasks.CALLS == [("send_email", "ada@example.com")]
    done = task_backends["default"].get_result(result.id)
    assert (done.status, done.return_value, done.worker_ids) == (
        TaskResultStatus.SUCCESSFUL, "sent to ada@example.com", ["w-routed-task"])
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL and result.return_value == "sent to ada@example.com"
