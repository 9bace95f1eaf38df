"""A scheduled task whose job is on a routed queue: its occurrence is staged in the scheduler's
transaction on ``DATABASE`` (with the watermark that makes it fire once) and the relay delivers
it into the routed database."""

from __future__ import annotations

import pytest

from tests.scheduling import utc
from tests.support.routing import ROUTED, raw
from ultimate_jobs import NO_TENANT, Scheduler, clock, job
from ultimate_jobs.outbox import Relay

pytestmark = [pytest.mark.postgres_only,
              pytest.mark.django_db(databases=["default", ROUTED], transaction=True)]


@job(name="tests.routing.digest", queue="emails", idempotency_key="{key}", tenant=NO_TENANT)
def digest(ctx, *, key: str) -> None:
    return None


def test_a_routed_occurrence_fires_once_staged_at_home_and_lands_on_the_routed_database(
        routed, declare_task, frozen_at) -> None:
    task = declare_task(name="t.routed-digest", cron="* * * * *", tz="UTC", job=digest,
                        input={"key": "digest-secret"})
    frozen_at(utc(2026, 6, 1, 10, 0, 30))
    scheduler = Scheduler(tasks=[task])
    scheduler.run_once()  # arms
    clock.advance(30)
    [fire] = scheduler.run_once().fired
    assert raw(ROUTED, "SELECT count(*) FROM ultimate_jobs_job") == [(0,)]  # staged, not inserted
    assert [str(r[0]) for r in raw("default", "SELECT id FROM ultimate_jobs_outboxentry")] == list(fire.jobs)
    assert Relay(database="default").run_once() == 1
    assert [(str(r[0]), r[1], r[2]) for r in raw(
        ROUTED, "SELECT id, queue, payload->>'key' FROM ultimate_jobs_job")] == [
        (fire.jobs[0], "emails", "digest-secret")]
    assert scheduler.run_once().fired == ()  # the occurrence fired once
