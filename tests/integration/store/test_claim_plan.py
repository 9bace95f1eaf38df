"""The claim statement walks its partial indexes on PostgreSQL: live rows only, no sequential scan of the
table, and no walk over rows waiting for a later run_at. And it keeps one prepared plan: with many
``delayed`` rows waiting, PostgreSQL would otherwise judge the generic plan dear (it cannot see the
``now`` parameter, so it guesses a third of them due) and plan the whole claim again on every pass,
the idle pickup's largest avoidable cost on such a table."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from tests.app.jobs import noop
from ultimate_jobs.db import store_for
from ultimate_jobs.db.postgres import JOB_CLAIM, JOB_INSERT_MANY, JOB_LIVE_BY_KEY
from ultimate_jobs.models.jobs import LIVE_STATES, RUNNABLE_STATES

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres_only]

DELAYED = 20_000  # enough rows waiting that the generic plan looks dear next to a custom one


def _plan_nodes(plan: dict) -> list[dict]:
    nodes = [plan]
    for child in plan.get("Plans", []):
        nodes += _plan_nodes(child)
    return nodes


def _claim_plan(analyze: bool = False) -> list[dict]:
    with connection.cursor() as cursor:
        cursor.execute("BEGIN")
        try:
            cursor.execute(("EXPLAIN (ANALYZE, FORMAT JSON) " if analyze else "EXPLAIN (FORMAT JSON) ")
                           + JOB_CLAIM.replace("%(names)b", "%(names)s").replace("%(blocked)b", "%(blocked)s"), {
                "queue": "default", "names": ["tests.noop"], "limit": 10, "worker_id": "w", "visibility": 30.0,
                "now": None, "blocked": ["some-tenant"]})
            plan = cursor.fetchone()[0]
        finally:
            cursor.execute("ROLLBACK")
    plan = plan if isinstance(plan, list) else json.loads(plan)
    return [n for n in _plan_nodes(plan[0]["Plan"]) if n.get("Relation Name") == "ultimate_jobs_job"]


def test_the_claim_walks_the_two_live_row_indexes() -> None:
    noop.enqueue_many([{"key": f"p{i}"} for i in range(5000)])
    with connection.cursor() as cursor:
        cursor.execute("UPDATE ultimate_jobs_job SET state = 'done' WHERE idempotency_key <> 'p4999'")
        cursor.execute("ANALYZE ultimate_jobs_job")
    on_jobs = _claim_plan()
    used = {n.get("Index Name") for n in on_jobs}
    assert {"ultimate_jobs_job_ready", "ultimate_jobs_job_due"} <= used, on_jobs
    assert not any(n["Node Type"] == "Seq Scan" for n in on_jobs)


def test_rows_waiting_for_a_later_run_at_cost_the_claim_nothing() -> None:
    # 3,000 delayed rows not yet due and one ready row: the claim must not walk the delayed ones
    # (before 0010 the run_at <= now test was a filter under ORDER BY priority: it read all 3,000).
    noop.using(delay="1h").enqueue_many([{"key": f"later-{i}"} for i in range(3000)])
    noop.enqueue(key="now")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE ultimate_jobs_job")
    on_jobs = _claim_plan(analyze=True)
    removed = sum(n.get("Rows Removed by Filter", 0) for n in on_jobs)
    read = sum(n.get("Actual Rows", 0) for n in on_jobs if "Index" in n["Node Type"])
    assert removed == 0 and read <= 2, on_jobs  # the ready row, then the claim's re-read of it


def test_the_sql_spells_the_same_live_and_runnable_states_as_the_models() -> None:
    live = "state IN (" + ", ".join(f"'{s}'" for s in LIVE_STATES) + ")"
    assert live in JOB_INSERT_MANY and live in JOB_LIVE_BY_KEY
    # The claim's two walks together take exactly the runnable states.
    assert "c.state = 'ready'" in JOB_CLAIM and "d.state IN ('delayed', 'suspended')" in JOB_CLAIM
    assert set(RUNNABLE_STATES) == {"ready", "delayed", "suspended"}


def test_the_conflict_target_matches_the_live_key_index() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'ultimate_jobs_job_live_key'")
        (indexdef,) = cursor.fetchone()
    assert "UNIQUE" in indexdef
    assert "COALESCE(tenant_id, ''::character varying)" in indexdef
    assert "'ready'" in indexdef and "'suspended'" in indexdef and "'done'" not in indexdef


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
