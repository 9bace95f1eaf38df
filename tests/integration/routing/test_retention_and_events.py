"""What runs over every jobs database: the retention purge expires a routed database's finished
jobs, and ``publish_event`` is published where any waiter may be."""

from __future__ import annotations

import pytest

from tests.app.jobs import noop
from tests.support.routing import ROUTED, raw
from ultimate_jobs import clock, publish_event
from ultimate_jobs.factories.retention import finished_jobs

pytestmark = [pytest.mark.postgres_only,
              pytest.mark.django_db(databases=["default", ROUTED], transaction=True)]


def test_the_retention_purge_expires_finished_jobs_on_the_routed_database(routed) -> None:
    old = noop.using(queue="emails").enqueue(key="old-done")
    fresh = noop.using(queue="emails").enqueue(key="fresh-done")
    raw(ROUTED, "UPDATE ultimate_jobs_job SET state = 'done', finished_at = now() - interval '30 days' "
                "WHERE id = %s", (old.id,))
    raw(ROUTED, "UPDATE ultimate_jobs_job SET state = 'done', finished_at = now() WHERE id = %s", (fresh.id,))
    totals = finished_jobs.purge_expired(clock.now())
    assert totals["jobs"] == 1
    assert raw(ROUTED, "SELECT id FROM ultimate_jobs_job") == [(fresh.id,)]


def test_an_event_is_published_on_every_jobs_database(routed) -> None:
    publish_event("invoice.paid", {"invoice": "inv-secret-42"}, tenant_id=None)
    for alias in ("default", ROUTED):
        assert raw(alias, "SELECT name, payload::text FROM ultimate_jobs_jobevent") == [
            ("invoice.paid", '{"invoice": "inv-secret-42"}')]
