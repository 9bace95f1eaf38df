"""What reads the job table without the whole-table indexes (0013_write_path) still walks an index.

A fresh job enters three indexes: the primary key, the live key and the claim's ready (or due)
index. There is no ``(state, queue)`` or ``(run_id)`` index over every row any more, so each reader
that used one -- ``queue_stats``, the retention purge, an event's wake of its waiting runs, a removed
job's step clean-up, the operator's lists and the doctor's lease checks -- must walk a partial index
that finished rows (or a run's first job) do not enter. Checked on a table of finished rows, where a
sequential scan would read them all: no plan may read the job table sequentially.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext

from tests.app.jobs import noop
from ultimate_jobs import ops
from ultimate_jobs.db.postgres import jobs as pg_jobs
from ultimate_jobs.db.postgres import runs as pg_runs
from ultimate_jobs.models import Job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres_only]

FINISHED = 50_000  # finished rows: a sequential scan of them is what each plan must avoid
TABLE = "ultimate_jobs_job"


@pytest.fixture
def finished_rows() -> None:
    """FINISHED done rows (each its run's first job: run_id = id), a few dead ones, a few live ones."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO ultimate_jobs_job (id, run_id, name, queue, priority, state, payload, idempotency_key,"
            " attempt, max_attempts, run_at, created_at, updated_at, finished_at)"
            " SELECT u.id, u.id, 'tests.noop', 'default', 0, CASE WHEN u.g %% 1000 = 0 THEN 'dead' ELSE 'done' END,"
            " '{}'::jsonb, 'old-' || u.g, 1, 3, now() - interval '2 days', now() - interval '2 days', now(),"
            " now() - interval '2 days'"
            " FROM (SELECT gen_random_uuid() AS id, g FROM generate_series(1, %s) AS g) AS u", [FINISHED])
        cursor.execute("ANALYZE ultimate_jobs_job")
    noop.enqueue_many([{"key": f"live-{i}"} for i in range(20)])
    noop.using(delay="1h").enqueue(key="later")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE ultimate_jobs_job")


def _nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    nodes = [plan]
    for child in plan.get("Plans", []):
        nodes += _nodes(child)
    return nodes


def _plan(sql: str, params: Any = None) -> dict[str, Any]:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (FORMAT JSON) " + sql, params)
        plan = cursor.fetchone()[0]
    plan = plan if isinstance(plan, list) else json.loads(plan)
    return plan[0]["Plan"]


def _subplan(plan: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [n for n in _nodes(plan) if n.get("Subplan Name") == name]
    return found


def _assert_indexed(plan: dict[str, Any], *expected: str) -> None:
    """No node of ``plan`` reads the job table sequentially, and each ``expected`` index is walked."""
    nodes = _nodes(plan)
    assert not [n for n in nodes if n["Node Type"] == "Seq Scan" and n.get("Relation Name") == TABLE], plan
    used = {n.get("Index Name") for n in nodes}
    assert set(expected) <= used, used


def _captured(call: Any) -> list[str]:
    with CaptureQueriesContext(connection) as seen:
        call()
    return [q["sql"] for q in seen.captured_queries if TABLE in q["sql"]]


def test_there_is_no_whole_table_index_but_the_primary_key() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s", [TABLE])
        defs = dict(cursor.fetchall())
    partial = {name for name, d in defs.items() if " WHERE " in d}
    assert set(defs) - partial == {"ultimate_jobs_job_pkey"}, defs
    assert "ultimate_jobs_job_state" not in defs and "ultimate_jobs_job_run" not in defs
    assert "WHERE (NOT (run_id = id))" in defs["ultimate_jobs_job_run_member"]


def test_a_fresh_job_is_its_runs_first_job_and_enters_three_indexes() -> None:
    first = noop.enqueue(key="fresh")
    joined = noop.using(run_id=first.run_id).enqueue(key="joined")
    assert first.run_id == first.id and joined.run_id == first.id != joined.id
    assert Job.objects.exclude(run_id=F("id")).count() == 1  # only the joined job enters the run-member index
    assert set(Job.objects.of_runs([first.run_id]).values_list("id", flat=True)) == {first.id, joined.id}


def test_queue_stats_counts_from_partial_indexes(finished_rows: None) -> None:
    (sql,) = _captured(ops.queue_stats)
    ready, waiting, running, finished = _plan(sql)["Plans"]  # the union's four parts, in order
    _assert_indexed(ready, "ultimate_jobs_job_ready")
    _assert_indexed(waiting, "ultimate_jobs_job_due")
    _assert_indexed(running)
    # The finished buckets are counted, not estimated: a walk of the finished index, or of the table
    # when nearly every row is finished (the planner's choice; docs/scaling.md, "Reports").
    assert {n.get("Index Name") for n in _nodes(finished)} <= {None, "ultimate_jobs_job_finished"}
    default = {s["queue"]: s for s in ops.queue_stats()}["default"]
    assert (default["done"], default["dead"], default["ready"], default["delayed"]) == (
        FINISHED - FINISHED // 1000, FINISHED // 1000, 20, 1)


def test_the_retention_purge_walks_the_finished_index(finished_rows: None) -> None:
    # Nothing is past a week's retention: the pick is two empty ranges of the finished index, not a
    # read of 50,000 finished rows (with rows to purge, a LIMITed scan finds them at once either way).
    plan = _plan(pg_jobs.JOB_PURGE_FINISHED, {"done_retention": 7 * 86400.0, "dead_retention": 7 * 86400.0,
                                              "limit": 500, "now": None})
    _assert_indexed(_subplan(plan, "CTE doomed"), "ultimate_jobs_job_finished")


def test_the_step_clean_up_asks_for_a_runs_jobs_where_they_are_indexed(finished_rows: None) -> None:
    plan = _plan(pg_jobs.JOB_PURGE_FINISHED, {"done_retention": 3600.0, "dead_retention": 3600.0,
                                              "limit": 500, "now": None})
    _assert_indexed(_subplan(plan, "CTE steps"), "ultimate_jobs_job_pkey", "ultimate_jobs_job_run_member")
    run_ids = list(Job.objects.filter(state="done").values_list("run_id", flat=True)[:3])
    sql, params = Job.objects.of_runs(run_ids).values("run_id").query.sql_with_params()
    _assert_indexed(_plan(sql, params), "ultimate_jobs_job_pkey", "ultimate_jobs_job_run_member")


def test_an_event_wakes_its_waiters_through_the_step_and_the_run(finished_rows: None) -> None:
    params = {"id": "00000000-0000-0000-0000-000000000001", "name": "order.paid", "payload": "{}",
              "tenant_id": None, "now": None}
    # Few runs wait: the planner walks the waiting rows (the due index, live rows only) or, per
    # waiting step, the run's jobs by the primary key and the run-member index. Never finished rows.
    plan = _subplan(_plan(pg_runs.EVENT_PUBLISH, params), "CTE woken")
    _assert_indexed(plan)
    assert {n.get("Index Name") for n in _nodes(plan)} & {"ultimate_jobs_job_due", "ultimate_jobs_job_pkey"}


@pytest.mark.parametrize("state", ["dead", "failed", "cancelled", "running", "suspended", "ready"])
def test_the_operators_list_by_a_rare_state_walks_an_index(finished_rows: None, state: str) -> None:
    (sql, *_) = _captured(lambda: ops.list_jobs(state=state, limit=50))
    _assert_indexed(_plan(sql))


def test_the_doctors_lease_checks_and_the_overview_walk_indexes(finished_rows: None) -> None:
    from ultimate_jobs.ops.doctor import lease_columns, live_key_unique, stuck_running

    for call in (stuck_running, lease_columns, live_key_unique, ops.overview):
        for sql in _captured(call):
            if "bucket" not in sql:  # queue_stats, inside the overview: its own test above
                _assert_indexed(_plan(sql))
