"""The built-in retention purge and its hourly task, on PostgreSQL and SQLite."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.scheduling import utc
from ultimate_jobs import Scheduler, Worker, clock, ops, registered_tasks
from ultimate_jobs.ids import uuid7
from ultimate_jobs.models import Job, JobStep

pytestmark = pytest.mark.django_db(transaction=True)

NOW = utc(2026, 6, 1, 12, 0, 0)
DAY = timedelta(days=1)


def make(state: str, age: timedelta, run_id: object = None) -> Job:
    finished = NOW - age if state in ("done", "failed", "dead", "cancelled") else None
    return Job.objects.create(name="tests.noop", state=state, payload={"key": "k"},
                              idempotency_key=str(uuid7()), run_id=run_id or uuid7(), run_at=NOW - age,
                              created_at=NOW - age, updated_at=NOW - age, finished_at=finished)


def test_the_purge_deletes_finished_jobs_past_their_retention_in_batches(frozen_at) -> None:  # type: ignore[no-untyped-def]
    frozen_at(NOW)
    old_done = [make("done", 15 * DAY) for _ in range(5)]
    kept = [make("done", 13 * DAY), make("dead", 89 * DAY), make("failed", 30 * DAY),
            make("ready", 400 * DAY), make("running", 400 * DAY)]
    old_dead = [make("dead", 91 * DAY), make("failed", 91 * DAY), make("cancelled", 91 * DAY)]
    JobStep.objects.create(run_id=old_done[0].run_id, name="s1", status="completed")
    shared = make("done", 15 * DAY)
    survivor = make("ready", DAY, run_id=shared.run_id)  # a retry of the same run is still live
    JobStep.objects.create(run_id=shared.run_id, name="s1", status="completed")

    from ultimate_jobs.retention import purge_retention

    result = purge_retention.enqueue(batch=2)
    Worker(queues=["default"], burst=True).run(install_signals=False)
    job = ops.get_job(result.id)
    assert job["state"] == "done"
    assert job["result"] == {"jobs": 9, "steps": 1, "batches": 5}  # 2+2+2+2+1: the short batch ends the pass
    left = set(Job.objects.exclude(id=result.id).values_list("id", flat=True))
    assert left == {j.id for j in kept} | {survivor.id}
    assert not {j.id for j in old_done + old_dead} & left
    assert list(JobStep.objects.values_list("run_id", flat=True)) == [shared.run_id]


def test_retention_follows_the_settings(frozen_at, settings) -> None:  # type: ignore[no-untyped-def]
    frozen_at(NOW)
    settings.ULTIMATE_JOBS = {**settings.ULTIMATE_JOBS, "DONE_RETENTION": "1h", "DEAD_RETENTION": "2d"}
    make("done", timedelta(hours=2))
    make("dead", DAY)
    from ultimate_jobs.retention import purge_retention

    purge_retention.enqueue()
    Worker(queues=["default"], burst=True).run(install_signals=False)
    # Neither is past its retention yet; "done" is the purge run itself.
    assert sorted(Job.objects.values_list("state", flat=True)) == ["dead", "done"]
    clock.advance(2 * DAY)
    purge_retention.enqueue()  # the first run finished: its key is free
    Worker(queues=["default"], burst=True).run(install_signals=False)
    assert list(Job.objects.values_list("state", flat=True)) == ["done"]  # the second run; the first went too


def test_the_hourly_retention_task_is_on_by_default_and_fires_the_purge(frozen_at) -> None:  # type: ignore[no-untyped-def]
    retention = next(t for t in registered_tasks() if t.name == "ultimate_jobs.retention")
    frozen_at(utc(2026, 6, 1, 12, 10))
    scheduler = Scheduler(tasks=[retention])
    scheduler.run_once()
    assert ops.next_task_run(retention, clock.now()) == utc(2026, 6, 1, 12, 17)
    clock.freeze(utc(2026, 6, 1, 12, 17, 1))
    fired, = scheduler.run_once().fired
    job = Job.objects.get(id=fired.jobs[0])
    assert (job.name, job.payload) == ("ultimate_jobs.purge_retention", {"batch": 1000})
