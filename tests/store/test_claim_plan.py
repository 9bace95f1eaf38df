"""The claim statement keeps one prepared plan on PostgreSQL. With many ``delayed`` rows waiting,
PostgreSQL would otherwise judge the generic plan dear (it cannot see the ``now`` parameter, so it
guesses a third of them due) and plan the whole claim again on every pass: the idle pickup's
largest avoidable cost on such a table."""

from __future__ import annotations

import pytest
from django.db import connection

from tests.app.jobs import noop
from ultimate_jobs.db import store_for

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db(transaction=True)]

DELAYED = 20_000


def _plant_delayed() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO ultimate_jobs_job (id, run_id, name, queue, priority, state, payload, idempotency_key,"
            " attempt, max_attempts, run_at, created_at, updated_at)"
            " SELECT gen_random_uuid(), gen_random_uuid(), 'tests.noop', 'default', 0, 'delayed',"
            " jsonb_build_object('key', 'later-' || g), 'later-' || g, 0, 3, now() + interval '1 hour', now(), now()"
            " FROM generate_series(1, %s) AS g", [DELAYED])
        cursor.execute("ANALYZE ultimate_jobs_job")


def _claim_plans() -> tuple[int, int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT generic_plans, custom_plans FROM pg_prepared_statements"
                       " WHERE statement LIKE %s", ["%Claim up to%"])
        rows = cursor.fetchall()
    assert len(rows) == 1, rows
    return rows[0]


def test_claims_over_many_delayed_rows_reuse_the_generic_plan() -> None:
    _plant_delayed()
    store = store_for("default")
    claimed = []
    for n in range(8):
        noop.enqueue(key=f"now-{n}")
        answer = store.job_settle_and_claim(settlements=[], claims={"default": 5}, names=["tests.noop"],
                                            worker_id="plan-test", visibility=30, now=None)
        claimed += [row.payload for row in answer.claimed["default"]]
    # Each claim took the row just enqueued, never one of the rows waiting for later.
    assert claimed == [f'{{"key": "now-{n}"}}' for n in range(8)]
    generic, custom = _claim_plans()
    assert (generic, custom) == (8, 0)
