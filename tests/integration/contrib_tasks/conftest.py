"""Fixtures for the django.tasks backend tests: a burst worker over the task queues."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.utils import timezone

from tests.support import django_tasks as tasks
from ultimate_jobs import Worker
from ultimate_jobs.models import Job

QUEUES = ["default", "emails", "queue-1"]


@pytest.fixture(autouse=True)
def _fresh_calls() -> Iterator[None]:
    tasks.CALLS.clear()
    tasks.STEP_CALLS.clear()
    yield


def drain(worker_id: str = "w-test", concurrency: int = 3) -> None:
    """Run every due task through a real worker (in-process, burst) until none is due. At least one
    slot per queue: a burst worker with fewer shared slots than queues may stop with one unclaimed."""
    for _ in range(20):
        with Worker(queues=QUEUES, burst=True, worker_id=worker_id, concurrency=concurrency) as worker:
            worker.run(install_signals=False)
        if not Job.objects.filter(state__in=("ready", "delayed"), run_at__lte=timezone.now()).exists():
            return
    raise AssertionError("tasks still due after 20 burst workers")


@pytest.fixture(autouse=True)
def _shared_thread(shared_thread_connections_closed: None) -> None:
    """aenqueue/aget_result run on asgiref's shared thread (tests/conftest.py)."""
