"""Flat and scale-out cases for ``bench/run.py`` (``--metrics flat,scale``).

- **flat** -- the same 2-worker drain of 10,000 no-ops and the same idle pickup as the plain
  cases, on a table that already holds 1,000,000 finished (``done``) rows, or 100,000 ``delayed``
  rows due in an hour (planted with one ``INSERT ... SELECT generate_series`` each, then
  ``VACUUM ANALYZE`` and a ``CHECKPOINT``; untimed). The claim must only touch live rows, so each figure should sit
  within 10 % of the empty table's, measured in the same round.
- **scale** -- the drain with 1, 2, 4 and 8 worker processes (10 threads each) against one
  PostgreSQL: jobs/s against processes, plotted by ``bench/plot.py``.
"""

from __future__ import annotations

from typing import Any

PLANTS = {"done": 1_000_000, "delayed": 100_000}
SCALE_PROCS = (1, 2, 4, 8)

_PLANT_SQL = """
WITH p AS (SELECT %(state)s::text AS state, %(state)s::text = 'done' AS done)
INSERT INTO ultimate_jobs_job (
    id, run_id, name, queue, priority, state, payload, idempotency_key, tenant_id, attempt, max_attempts,
    run_at, created_at, updated_at, started_at, finished_at, result)
SELECT gen_random_uuid(), gen_random_uuid(), 'bench.noop', 'default', 0, p.state,
       jsonb_build_object('i', -1, 'seq', g), 'planted:' || p.state || ':' || g, NULL,
       CASE WHEN p.done THEN 1 ELSE 0 END, 3,
       CASE WHEN p.done THEN now() - interval '1 day' ELSE now() + interval '1 hour' END,
       now() - interval '1 day', now(), NULL, CASE WHEN p.done THEN now() - interval '1 day' END, NULL
  FROM p, generate_series(1, %(rows)s) AS g
"""


def plant(state: str) -> int:
    """Plant the rows the flat case ``state`` names (``done`` or ``delayed``); answer how many."""
    import psycopg
    from django.conf import settings

    from bench import measure

    rows = PLANTS[state]
    with psycopg.connect(measure.dsn(settings.DATABASES["default"]["NAME"]), autocommit=True) as conn:
        conn.execute(_PLANT_SQL, {"state": state, "rows": rows})
        conn.execute("VACUUM ANALYZE ultimate_jobs_job")
        conn.execute("CHECKPOINT")  # the planting's dirty pages written now, not during the timed drain
    return rows


def run_case(name: str, n: int, concurrency: int, samples: int) -> dict[str, Any]:
    """``flat-<state>-drain``, ``flat-<state>-latency`` or ``scale-<procs>p``."""
    from bench import measure

    if name.startswith("scale-"):
        procs = int(name[len("scale-"):-1])
        got = measure.measure_drain(procs, n=n, concurrency=concurrency)
        return {f"scale_{procs}p_jobs_per_s": got[f"drain_{procs}p_jobs_per_s"]}
    _, state, metric = name.split("-")
    plant(state)
    if metric == "drain":
        got = measure.measure_drain(2, n=n, concurrency=concurrency)
        return {f"flat_{state}_drain_2p_jobs_per_s": got["drain_2p_jobs_per_s"]}
    got = measure.measure_latency(samples=samples)
    return {f"flat_{state}_latency_median_ms": got["latency_median_ms"],
            f"flat_{state}_latency_p95_ms": got["latency_p95_ms"]}


CASES = {
    "flat": [f"flat-{state}-{metric}" for state in PLANTS for metric in ("drain", "latency")],
    "scale": [f"scale-{procs}p" for procs in SCALE_PROCS],
}
