"""The claim statement walks its partial index on PostgreSQL (no sequential scan of the table)."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from tests.app.jobs import noop
from ultimate_jobs.db.postgres import JOB_CLAIM, JOB_INSERT_MANY, JOB_LIVE_BY_KEY
from ultimate_jobs.models.jobs import LIVE_STATES, RUNNABLE_STATES

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres_only]


def _plan_nodes(plan: dict) -> list[dict]:
    nodes = [plan]
    for child in plan.get("Plans", []):
        nodes += _plan_nodes(child)
    return nodes


def test_the_claim_uses_the_partial_claim_index() -> None:
    noop.enqueue_many([{"key": f"p{i}"} for i in range(5000)])
    with connection.cursor() as cursor:
        cursor.execute("UPDATE ultimate_jobs_job SET state = 'done' WHERE idempotency_key <> 'p4999'")
        cursor.execute("ANALYZE ultimate_jobs_job")
        cursor.execute("BEGIN")
        try:
            cursor.execute("EXPLAIN (FORMAT JSON) " + JOB_CLAIM.replace("%(names)b", "%(names)s")
                           .replace("%(blocked)b", "%(blocked)s"), {
                "queue": "default", "names": ["tests.noop"], "limit": 10, "worker_id": "w", "visibility": 30.0,
                "now": None, "blocked": ["some-tenant"]})
            plan = cursor.fetchone()[0]
        finally:
            cursor.execute("ROLLBACK")
    plan = plan if isinstance(plan, list) else json.loads(plan)
    nodes = _plan_nodes(plan[0]["Plan"])
    on_jobs = [n for n in nodes if n.get("Relation Name") == "ultimate_jobs_job"]
    assert any(n.get("Index Name") == "ultimate_jobs_job_claim" for n in on_jobs), on_jobs
    assert not any(n["Node Type"] == "Seq Scan" for n in on_jobs)


def test_the_sql_spells_the_same_live_and_runnable_states_as_the_models() -> None:
    live = "state IN (" + ", ".join(f"'{s}'" for s in LIVE_STATES) + ")"
    assert live in JOB_INSERT_MANY and live in JOB_LIVE_BY_KEY
    assert "state IN (" + ", ".join(f"'{s}'" for s in RUNNABLE_STATES) + ")" in JOB_CLAIM


def test_the_conflict_target_matches_the_live_key_index() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'ultimate_jobs_job_live_key'")
        (indexdef,) = cursor.fetchone()
    assert "UNIQUE" in indexdef
    assert "COALESCE(tenant_id, ''::character varying)" in indexdef
    assert "'ready'" in indexdef and "'suspended'" in indexdef and "'done'" not in indexdef
