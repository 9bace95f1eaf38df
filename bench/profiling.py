"""Where the time goes: the enqueue paths and the worker's drain loop, profiled (not part of ``make bench``).

Usage::

    .venv/bin/python bench/profiling.py single [--n 2000]    # noop.enqueue in autocommit
    .venv/bin/python bench/profiling.py bulk [--calls 10]     # enqueue_many of 1,000, --calls times
    .venv/bin/python bench/profiling.py drain [--n 10000]     # an in-process Worker(burst=True), 10 threads
    .venv/bin/python bench/profiling.py explain               # EXPLAIN ANALYZE of insert, claim and settle

Each profile prints: wall time and rate, the client-side time per SQL statement (Django's
``execute_wrapper``: count, total, mean; named after the ``ultimate_jobs.db.postgres`` constant),
then cProfile's top functions by own time and by cumulative time. ``drain`` also prints the
claim batch sizes (the ``on_pass`` hook) and profiles only the worker's loop thread (the bodies
run on pool threads; use py-spy on a real ``jobs_worker`` for those). Each run uses a fresh
``bench_uj_prof_<pid>`` database, dropped at the end.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


class StatementTimer:
    """A Django ``execute_wrapper`` timing each statement, keyed by its SQL constant's name."""

    def __init__(self) -> None:
        from ultimate_jobs.db.postgres import jobs as postgres

        self.names = {v: k for k, v in vars(postgres).items() if k.isupper() and isinstance(v, str)}
        self.times: dict[str, list[float]] = defaultdict(list)

    def __call__(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            name = self.names.get(sql) or " ".join(sql.split())[:60]
            self.times[name].append(time.perf_counter() - t0)

    def print(self, wall: float) -> None:
        print(f"\nSQL, client side (wall {wall * 1000:.0f} ms):")
        print(
            f"  {'statement':40} {'count':>7} {'total ms':>9} {'% wall':>7} {'mean us':>8} {'median us':>9}"
        )
        for name, ts in sorted(self.times.items(), key=lambda kv: -sum(kv[1])):
            print(
                f"  {name:40} {len(ts):7} {sum(ts) * 1000:9.1f} {100 * sum(ts) / wall:6.1f}% "
                f"{statistics.mean(ts) * 1e6:8.0f} {statistics.median(ts) * 1e6:9.0f}"
            )


@contextmanager
def profiled(label: str, top: int) -> Iterator[None]:
    from django.db import connection

    timer = StatementTimer()
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    with connection.execute_wrapper(timer):
        prof.enable()
        try:
            yield
        finally:
            prof.disable()
    wall = time.perf_counter() - t0
    print(f"\n===== {label}: {wall * 1000:.0f} ms wall =====")
    timer.print(wall)
    for order in ("tottime", "cumulative"):
        out = io.StringIO()
        pstats.Stats(prof, stream=out).strip_dirs().sort_stats(order).print_stats(top)
        body = out.getvalue()
        print(f"\ncProfile, top {top} by {order}:\n" + body[body.find("   ncalls") :].rstrip())


def profile_single(n: int, top: int) -> None:
    from bench import measure

    for _ in range(20):
        measure.enqueue_one(-1)
    t0 = time.perf_counter()
    with profiled(f"single enqueue x {n}", top):
        for _ in range(n):
            measure.enqueue_one(-1)
    print(f"\n{n / (time.perf_counter() - t0):.0f} jobs/s under the profiler")


def profile_bulk(calls: int, top: int) -> None:
    from bench import measure

    measure.enqueue_one(-1)
    with profiled(f"enqueue_many(1000) x {calls}", top):
        for _ in range(calls):
            measure.enqueue_many(1000)


def profile_drain(n: int, concurrency: int, top: int) -> None:
    from bench import measure
    from ultimate_jobs import Worker

    measure.enqueue_many(n)
    batches: Counter[int] = Counter()
    worker = Worker(
        queues=["default"],
        concurrency=concurrency,
        burst=True,
        on_pass=lambda w, started: batches.update([len(started)]),
    )
    with profiled(f"drain {n} in-process, {concurrency} threads (loop thread only)", top):
        t0 = time.perf_counter()
        stats = worker.run(install_signals=False)
        wall = time.perf_counter() - t0
    passes = sum(batches.values())
    print(
        f"\n{stats['settled']} settled in {wall:.2f}s = {stats['settled'] / wall:.0f} jobs/s; "
        f"{passes} passes, {stats['settled'] / max(1, passes):.2f} jobs per pass"
    )
    print("claimed per pass -> passes: " + ", ".join(f"{k}: {v}" for k, v in sorted(batches.items())))


def explain() -> None:
    """EXPLAIN (ANALYZE, BUFFERS) of the insert (1 and 1,000 rows), the claim and the settle; rolled back."""
    from django.db import connection, transaction

    from bench import measure
    from bench.jobs import noop
    from ultimate_jobs.db.postgres import jobs as postgres

    measure.enqueue_many(10_000)
    opts = noop.using()
    for rows in (1, 1000):
        batch = [opts.row({"i": -1, "seq": 10**12 + k}) for k in range(rows)]
        params = {**postgres.row_columns(batch), "now": None, "notify": ["default"]}
        show(f"JOB_INSERT_MANY, {rows} row(s)", postgres.JOB_INSERT_MANY, params)
    claim = {
        "queue": "default",
        "names": ["bench.noop"],
        "limit": 10,
        "worker_id": "explain",
        "visibility": 30.0,
        "now": None,
        "blocked": [],  # tenants at their LIMITS cap (none here); an older JOB_CLAIM ignores the key
    }
    show("JOB_CLAIM, limit 10, 10,000 ready", postgres.JOB_CLAIM, claim)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(postgres.JOB_CLAIM, claim)
        held = cursor.fetchall()
        settle = postgres._settlement_columns([_done(row) for row in held], None)
        show("JOB_SETTLE_MANY, 10 rows", postgres.JOB_SETTLE_MANY, settle)
        transaction.set_rollback(True)


def _done(row: Any) -> Any:
    """A done settlement of one claimed row (the JOB_CLAIM answer's id and claim columns)."""
    from ultimate_jobs.db import Settlement

    return Settlement(id=row[0], claim=row[7], state="done")


def show(label: str, sql: str, params: dict[str, Any]) -> None:
    from django.db import connection, transaction

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS, SETTINGS) " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        transaction.set_rollback(True)
    print(f"\n===== EXPLAIN ANALYZE {label} =====\n{plan}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["single", "bulk", "drain", "explain"])
    ap.add_argument("--n", type=int, default=None)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--concurrency", type=int, default=10)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    os.environ["BENCH_UJ_DB"] = f"bench_uj_prof_{os.getpid()}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    import django

    django.setup()
    from bench import measure

    measure.recreate_database()
    try:
        if args.what == "single":
            profile_single(args.n or 2000, args.top)
        elif args.what == "bulk":
            profile_bulk(args.calls, args.top)
        elif args.what == "drain":
            profile_drain(args.n or 10_000, args.concurrency, args.top)
        else:
            explain()
    finally:
        measure.drop_database()


if __name__ == "__main__":
    main()
