"""``backfill()`` sweep throughput on PostgreSQL, against the same keyset loop written by hand.

Usage::

    .venv/bin/python bench/backfill.py                        # 100,000 rows, 3 interleaved rounds
    .venv/bin/python bench/backfill.py --rows 1000000 --rounds 1
    .venv/bin/python bench/backfill.py --snapshot HEAD        # measure one commit while others edit the tree
    .venv/bin/python bench/backfill.py --profile              # where a page's time goes, then cProfile
    .venv/bin/python bench/backfill.py --summary bench/results/backfill-STAMP.jsonl   # the table again
    .venv/bin/python -m bench.backfill ...                    # the same

Not part of ``make test`` or ``make bench``: run it by hand against a PostgreSQL reachable as in
``bench/settings.py`` (``BENCH_PG_HOST``/``PORT``/``USER``/``PASSWORD``).

Options (default): ``--rows`` (100,000), ``--batch`` (1,000), ``--rate`` (10,000 batches/s: the
pacer never waits, its interval is under its 1 ms resolution), ``--rounds`` (3), ``--snapshot``
(none: the working tree), ``--out`` (``bench/results/backfill-STAMP.jsonl``), ``--profile``
(off: instead of the rounds, one database in this process: the loop and the pass timed piece by
piece per page, by wrapping the functions named in ``split_backfill``, then one more pass under
cProfile on the worker's body thread), ``--top`` (25 cProfile rows), ``--summary FILE`` (print
the table of a finished run's records instead of measuring).

Two cases, each in a fresh process of its own (as ``bench/run.py``'s cases) on a freshly created
and migrated ``bench_uj_<pid>`` database (dropped at the end), run in every round; the baseline
goes first in odd rounds and second in even ones:

- **baseline** -- the keyset loop written by hand in the main thread, no job machinery::

      while rows := list(SweepRow.objects.order_by("pk").filter(pk__gt=cursor)[:batch]):
          SweepRow.objects.filter(pk__in=[r.pk for r in rows]).update(done=True)
          cursor = rows[-1].pk

- **backfill** -- ``backfill(name="bench.sweep", tenant=NO_TENANT, source=lambda ctx:
  SweepRow.objects.all(), handle=<the same UPDATE>, batch=1000, rate=10_000)``, enqueued
  (``force=True``) and run by a real in-process ``Worker(queues=["default"], concurrency=1,
  burst=True)``: one durable step ``batch:<n>`` per page, the pacer inside it, a ``BackfillRun``
  ledger update per page. Both read the same SQL page (``ORDER BY id LIMIT 1000`` after the
  cursor) and send the same UPDATE, each in autocommit.

Before either is timed: the table ``bench_sweeprow (id bigint identity, value int, done bool)``
is created with a schema editor (the ``bench`` app has no migrations), filled with ``--rows``
rows by one ``generate_series`` INSERT, ``VACUUM ANALYZE``d, then ``CHECKPOINT``. Figures per case:

- ``rows_per_s`` -- rows / wall: the baseline's loop; for the backfill, from just before
  ``enqueue()`` to the end of the worker pass that settled the run (claim, ledger, every step,
  settle). The worker's own exit after that (``Worker.close()``: its LISTEN thread notices the
  stop only at its 1 s ``notifies`` timeout) is recorded apart as ``backfill_worker_exit_ms``.
- ``batch_ms`` -- wall / pages with rows.
- ``cycle_ms`` -- the steady per-page time: (last page's UPDATE start - first page's) / (pages - 1),
  so the fixed start and finish costs are left out.
- ``update_ms`` -- median time of the UPDATE itself: the same statement in both cases.
- ``outside_ms`` -- median time from one page's UPDATE returning to the next one's starting: the
  SELECT of the next page plus whatever the machinery adds around it (pacer, ledger, checkpoint).
- ``fixed_ms`` -- wall before the first UPDATE and after the last one (for the backfill: enqueue,
  claim, ledger open, steps read, the first SELECT; then the last empty page, ledger complete,
  settle).
- ``rss_peak_mib`` / ``rss_before_mib`` -- the process's resident set (psutil, every 50 ms during
  the timed part) at its highest, and just before it.

The table shows medians over rounds and the ratio backfill / baseline (median of the per-round
ratios: rows/s below 1.00x is the machinery's cost); the ms rows show the backfill's figure minus
the baseline's in the same round, and ``overhead per batch, wall`` is (backfill wall - baseline
wall) / pages. No wall-clock limit is asserted anywhere.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # after PYTHONPATH, so a --snapshot's ultimate_jobs wins over the tree's
RESULTS = ROOT / "bench" / "results"
TABLE = "bench_sweeprow"
NAME = "bench.sweep"

# (UPDATE start, UPDATE end, rows) per page, appended by whichever thread runs the page.
PAGES: list[tuple[float, float, int]] = []
_declared: dict[str, Any] = {}


def declare(batch: int, rate: float) -> tuple[Any, Any]:
    """The bench-only model and the backfill, declared once per process (after ``django.setup()``)."""
    if not _declared:
        from django.db import models

        from ultimate_jobs import NO_TENANT, backfill

        class SweepRow(models.Model):
            value = models.IntegerField()
            done = models.BooleanField(default=False)

            class Meta:
                app_label = "bench"
                db_table = TABLE

        def mark_done(page: Any) -> None:
            update(SweepRow, [row.pk for row in page.rows])

        _declared["model"] = SweepRow
        _declared["sweep"] = backfill(name=NAME, tenant=NO_TENANT, source=lambda ctx: SweepRow.objects.all(),
                                      handle=mark_done, batch=batch, rate=rate)
    return _declared["model"], _declared["sweep"]


def update(model: Any, ids: list[Any]) -> None:
    """The page's work, the same in both cases: one set-based UPDATE, timed."""
    t0 = time.perf_counter()
    model.objects.filter(pk__in=ids).update(done=True)
    PAGES.append((t0, time.perf_counter(), len(ids)))


# -- the table --------------------------------------------------------------------------------------


def prepare(model: Any, rows: int) -> None:
    """A fresh database with ``rows`` undone rows, analysed and checkpointed (untimed)."""
    from django.db import connection

    from bench import measure

    measure.recreate_database()
    with connection.schema_editor() as editor:
        editor.create_model(model)
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {TABLE} (value, done) SELECT g, false FROM generate_series(1, %s) g",
                       [rows])
        cursor.execute(f"VACUUM ANALYZE {TABLE}")
        cursor.execute("CHECKPOINT")  # the fill's WAL is not flushed during the timed part


def undone(model: Any) -> int:
    return model.objects.filter(done=False).count()


# -- the two cases ----------------------------------------------------------------------------------


def sweep_by_hand(model: Any, batch: int) -> int:
    """The baseline: the pass's own page query and the same UPDATE, with no job machinery."""
    cursor = None
    pages = 0
    while True:
        ordered = model.objects.order_by("pk")
        found = list((ordered if cursor is None else ordered.filter(pk__gt=cursor))[:batch])
        if not found:
            break
        update(model, [row.pk for row in found])
        cursor = found[-1].pk
        pages += 1
    return pages


def sweep_by_backfill(sweep: Any) -> dict[str, Any]:
    """Enqueue the backfill and run it to completion on a real in-process worker; answer its result."""
    from ultimate_jobs import Worker
    from ultimate_jobs.models import Job

    settled: list[float] = []

    def on_pass(w: Any, started: list[Any]) -> None:
        if w.stats["settled"] and not settled:
            settled.append(time.perf_counter())

    worker = Worker(queues=["default"], concurrency=1, burst=True, on_pass=on_pass)
    t0 = time.perf_counter()
    sweep.enqueue(force=True)
    stats = worker.run(install_signals=False)
    exited = time.perf_counter()
    job = Job.objects.get(name=NAME)
    if job.state != "done" or stats["settled"] != 1 or not settled:
        raise RuntimeError(f"the pass ended {job.state} ({job.error_code}: {job.last_error}); "
                           f"worker stats {stats}")
    return {"start": t0, "end": settled[0], "elapsed": settled[0] - t0,
            "exit_ms": (exited - settled[0]) * 1000, "result": job.result}


class RssSampler:
    """This process's RSS every ``every`` seconds on a daemon thread; ``peak`` in bytes."""

    def __init__(self, every: float = 0.05) -> None:
        import psutil

        self.proc = psutil.Process()
        self.before = self.peak = self.proc.memory_info().rss
        self.every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rss-sampler", daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self.peak = max(self.peak, self.proc.memory_info().rss)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)


def figures(prefix: str, start: float, end: float, rows: int) -> dict[str, float]:
    """The case's figures from its start and end and the pages' UPDATE timestamps."""
    pages = [p for p in PAGES if p[2]]
    if sum(p[2] for p in pages) != rows:
        raise RuntimeError(f"{prefix}: updated {sum(p[2] for p in pages)} rows of {rows}")
    elapsed = end - start
    n = len(pages)
    span = pages[-1][0] - pages[0][0]
    outside = [b[0] - a[1] for a, b in zip(pages, pages[1:], strict=False)]
    return {
        f"{prefix}_rows_per_s": rows / elapsed,
        f"{prefix}_batch_ms": elapsed / n * 1000,
        f"{prefix}_cycle_ms": span / (n - 1) * 1000 if n > 1 else elapsed * 1000,
        f"{prefix}_update_ms": statistics.median(p[1] - p[0] for p in pages) * 1000,
        f"{prefix}_outside_ms": statistics.median(outside) * 1000 if outside else 0.0,
        f"{prefix}_fixed_ms": ((pages[0][0] - start) + (end - pages[-1][1])) * 1000,
        f"{prefix}_elapsed_s": elapsed,
        f"{prefix}_batches": float(n),
    }


def run_case(name: str, args: argparse.Namespace) -> dict[str, Any]:
    model, sweep = declare(args.batch, args.rate)
    prepare(model, args.rows)
    PAGES.clear()
    extra: dict[str, Any] = {}
    with RssSampler() as rss:
        if name == "baseline":
            start = time.perf_counter()
            sweep_by_hand(model, args.batch)
            end = time.perf_counter()
        else:
            done = sweep_by_backfill(sweep)
            start, end, extra["result"] = done["start"], done["end"], done["result"]
            extra["backfill_worker_exit_ms"] = done["exit_ms"]
    left = undone(model)
    if left:
        raise RuntimeError(f"{name}: {left} rows left undone")
    return {**figures(name, start, end, args.rows), **extra, f"{name}_rss_peak_mib": rss.peak / 2**20,
            f"{name}_rss_before_mib": rss.before / 2**20,
            f"{name}_maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def case_main(args: argparse.Namespace) -> None:
    """``--case NAME``: measure once and print one JSON record (what the orchestrator reads back)."""
    from bench.run import commit, setup_django

    setup_django()
    import ultimate_jobs

    rec: dict[str, Any] = {"case": args.case, "commit": commit(), "rows": args.rows, "batch": args.batch,
                           "rate": args.rate, "code": str(Path(ultimate_jobs.__file__).parent)}
    try:
        rec.update(run_case(args.case, args))
    except Exception as exc:  # recorded, so one failed case does not lose the round
        rec["error"] = repr(exc)
    print(json.dumps(rec, sort_keys=True), flush=True)


# -- the orchestrator ---------------------------------------------------------------------------------


def case_argv(name: str, args: argparse.Namespace) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--case", name, "--rows", str(args.rows),
            "--batch", str(args.batch), "--rate", repr(args.rate)]


def run_one(name: str, rnd: int, args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    t0 = time.perf_counter()
    proc = subprocess.run(case_argv(name, args), env=env, capture_output=True, text=True)
    lines = proc.stdout.strip().splitlines()
    rec: dict[str, Any] = {"round": rnd, "ts": time.strftime("%Y-%m-%dT%H:%M:%S"), "load": os.getloadavg()[0]}
    rec.update(json.loads(lines[-1]) if proc.returncode == 0 and lines
               else {"case": name, "error": f"rc={proc.returncode}: {proc.stderr[-1000:]}"})
    shown = " ".join(f"{k.split('_', 1)[1]}={v:,.1f}" for k, v in sorted(rec.items())
                     if isinstance(v, float) and k.startswith(name))
    print(f"round {rnd} {name:8} {time.perf_counter() - t0:5.1f}s {rec.get('commit', '')} "
          f"load={rec['load']:.2f} {shown} {rec.get('error', '')}", flush=True)
    with open(args.out, "a") as f:
        f.write(json.dumps(rec, sort_keys=True) + "\n")
    return rec


def summarize(records: list[dict[str, Any]], rows: int, batch: int) -> list[list[str]]:
    """Rows of the table: medians over rounds for each case, and the per-round ratio / difference."""
    from bench.report import spread

    by_round: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
    for rec in records:
        if "error" not in rec:
            by_round[rec["round"]][rec["case"]] = rec
    rounds = [r for r in by_round.values() if {"baseline", "backfill"} <= r.keys()]
    out = []
    sweep = f"sweep {rows:,} rows, batch {batch:,}"
    for key, label, unit, compare in (
        ("rows_per_s", sweep, "rows/s", "ratio"),
        ("batch_ms", "wall per batch", "ms", "diff"),
        ("cycle_ms", "steady cycle per batch", "ms", "diff"),
        ("update_ms", "the UPDATE alone, per batch (median)", "ms", "diff"),
        ("outside_ms", "outside the UPDATE, per batch (median)", "ms", "diff"),
        ("fixed_ms", "before the first and after the last UPDATE", "ms", "diff"),
        ("rss_peak_mib", "peak RSS while sweeping", "MiB", "diff"),
    ):
        base = [r["baseline"][f"baseline_{key}"] for r in rounds]
        ours = [r["backfill"][f"backfill_{key}"] for r in rounds]
        if not base:
            continue
        if compare == "ratio":
            cmp = [o / b for o, b in zip(ours, base, strict=True)]
            text = f"{statistics.median(cmp):.3f}x ({min(cmp):.3f}-{max(cmp):.3f})"
        else:
            cmp = [o - b for o, b in zip(ours, base, strict=True)]
            text = f"{statistics.median(cmp):+,.2f} ({min(cmp):+,.2f} to {max(cmp):+,.2f})"
        out.append([f"{label} ({unit})", spread(base), spread(ours), text])
    if rounds:
        n = [r["backfill"]["backfill_batches"] for r in rounds]
        per = [(r["backfill"]["backfill_elapsed_s"] - r["baseline"]["baseline_elapsed_s"]) / b * 1000
               for r, b in zip(rounds, n, strict=True)]
        out.append(["overhead per batch, wall (ms)", "", "", f"{statistics.median(per):+.3f} "
                    f"({min(per):+.3f} to {max(per):+.3f})"])
    return out


def orchestrate(args: argparse.Namespace) -> None:
    from bench.run import boot_orchestrator, case_env, versions

    code = boot_orchestrator(args.snapshot)
    from bench import measure, report

    args.out.parent.mkdir(parents=True, exist_ok=True)
    facts: dict[str, object] = {**versions(), "rows": f"{args.rows:,}", "batch": args.batch,
                                "rate": args.rate, "rounds": args.rounds,
                                "worker": "in-process Worker(concurrency=1, burst=True)",
                                "code": code or ROOT, "results": args.out,
                                "load average (1, 5, 15 min)": ", ".join(f"{x:.2f}" for x in os.getloadavg())}
    report.print_facts("versions and settings", facts)
    env = case_env(code)
    records: list[dict[str, Any]] = []
    try:
        for rnd in range(1, args.rounds + 1):
            order = ["baseline", "backfill"] if rnd % 2 else ["backfill", "baseline"]
            records += [run_one(name, rnd, args, env) for name in order]
    finally:
        measure.drop_database()
    print(f"\nload average after: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print_summary(records, args.rows, args.batch)


def print_summary(records: list[dict[str, Any]], rows: int, batch: int) -> None:
    from bench import report

    header = ["metric", "hand-written loop", "backfill() on a Worker", "backfill vs loop (per round)"]
    report.print_table("backfill() sweep vs the hand-written keyset loop: medians (min-max, rounds)", header,
                       summarize(records, rows, batch))


def summary_main(path: Path) -> None:
    """``--summary FILE``: the table again, from a finished run's records."""
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    ok = [r for r in records if "error" not in r]
    if not ok:
        raise SystemExit(f"{path}: no record without an error")
    for rec in records:
        print(f"round {rec['round']} {rec['case']:8} {rec.get('commit', '')} load={rec.get('load', 0):.2f} "
              f"{rec.get('error', '')}")
    print_summary(records, ok[0]["rows"], ok[0]["batch"])


# -- the profile ----------------------------------------------------------------------------------


class Split:
    """Wall time of chosen functions, by label: each wrapped (on its class) for the duration of a pass.

    Cheaper than cProfile (one ``perf_counter`` pair per call, nothing per Python frame), so the
    per-page figures stay close to an unprofiled run's.
    """

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = defaultdict(list)
        self._undo: list[tuple[Any, str, Any]] = []

    def wrap(self, owner: Any, attr: str, label: str) -> None:
        original = owner.__dict__[attr]
        times = self.times[label]

        @functools.wraps(original)
        def timed(*a: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return original(*a, **kw)
            finally:
                times.append(time.perf_counter() - t0)

        setattr(owner, attr, timed)
        self._undo.append((owner, attr, original))

    def __enter__(self) -> Split:
        return self

    def __exit__(self, *exc: object) -> None:
        for owner, attr, original in reversed(self._undo):
            setattr(owner, attr, original)
        self._undo.clear()

    def print(self, title: str, pages: int, wall: float) -> None:
        print(f"\n{title}: {wall * 1000:.0f} ms, {pages} pages with rows, "
              f"{wall / pages * 1000:.2f} ms per page")
        print(f"  {'what':58} {'calls/page':>10} {'ms/page':>8} {'median ms':>9}")
        rows = [("the UPDATE (handle)", [p[1] - p[0] for p in PAGES]), *self.times.items()]
        for label, ts in rows:
            if ts:
                print(f"  {label:58} {len(ts) / pages:10.2f} {sum(ts) / pages * 1000:8.3f} "
                      f"{statistics.median(ts) * 1000:9.3f}")


def split_backfill() -> Split:
    from django.db.models.query import QuerySet

    from ultimate_jobs.db.postgres import PostgresStore
    from ultimate_jobs.factories import pacer
    from ultimate_jobs.factories.backfill import ledger as backfill_ledger
    from ultimate_jobs.runtime import progress, steps

    split = Split()
    split.wrap(steps.Steps, "run", "ctx.step.run: one whole step")
    split.wrap(steps.Steps, "_call", "  the page fn (pacer + SELECT + UPDATE + ledger)")
    split.wrap(pacer.Pacer, "wait", "    pacer.wait")
    split.wrap(QuerySet, "_fetch_all", "    SELECT + model instances (QuerySet._fetch_all)")
    split.wrap(backfill_ledger.Ledger, "progress", "    ledger UPDATE (Ledger.progress)")
    split.wrap(PostgresStore, "step_complete", "  checkpoint (PostgresStore.step_complete)")
    split.wrap(progress.Progress, "__call__", "ctx.progress (a write at most once a second)")
    split.wrap(PostgresStore, "job_progress", "  its write (PostgresStore.job_progress)")
    return split


def profile_main(args: argparse.Namespace) -> None:
    """In this process: the loop and the pass timed piece by piece, then the pass under cProfile."""
    import cProfile
    import io
    import pstats

    os.environ["BENCH_UJ_DB"] = f"bench_uj_prof_{os.getpid()}"
    from bench.run import commit, setup_django, snapshot

    if args.snapshot:  # as bench/run.py's sitecustomize does: the snapshot, never the editable install
        code, os.environ["BENCH_UJ_COMMIT"] = snapshot(args.snapshot)
        sys.path.insert(0, code)
        sys.meta_path[:] = [f for f in sys.meta_path if "ultimate_jobs" not in getattr(f, "__module__", "")]
    setup_django()
    from django.db.models.query import QuerySet

    import ultimate_jobs

    print(f"ultimate_jobs {commit()} from {Path(ultimate_jobs.__file__).parent}; {args.rows:,} rows, "
          f"batch {args.batch:,}; load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")

    from bench import measure
    from ultimate_jobs.factories.backfill import sweep as backfill_pass

    model, sweep = declare(args.batch, args.rate)
    try:
        prepare(model, args.rows)
        PAGES.clear()
        with Split() as split:
            split.wrap(QuerySet, "_fetch_all", "SELECT + model instances (QuerySet._fetch_all)")
            t0 = time.perf_counter()
            pages = sweep_by_hand(model, args.batch)
            wall = time.perf_counter() - t0
        split.print("===== hand-written loop", pages, wall)

        prepare(model, args.rows)
        PAGES.clear()
        with split_backfill() as split:
            done = sweep_by_backfill(sweep)
        pages = len([p for p in PAGES if p[2]])
        split.print("===== backfill pass, enqueue -> settled", pages, done["elapsed"])

        prepare(model, args.rows)
        PAGES.clear()
        prof = cProfile.Profile()
        original: Callable[..., Any] = backfill_pass.run
        inside: list[float] = []

        def profiled_run(*a: Any, **kw: Any) -> Any:  # runs on the worker's body thread
            t0 = time.perf_counter()
            prof.enable()
            try:
                return original(*a, **kw)
            finally:
                prof.disable()
                inside.append(time.perf_counter() - t0)

        backfill_pass.run = profiled_run
        try:
            sweep_by_backfill(sweep)
        finally:
            backfill_pass.run = original
        print(f"\n===== backfill pass under cProfile (body thread only): {inside[0] * 1000:.0f} ms, "
              f"{inside[0] / pages * 1000:.2f} ms per page =====")
        for order in ("tottime", "cumulative"):
            out = io.StringIO()
            pstats.Stats(prof, stream=out).strip_dirs().sort_stats(order).print_stats(args.top)
            body = out.getvalue()
            print(f"\ncProfile, top {args.top} by {order}:\n" + body[body.find("   ncalls"):].rstrip())
    finally:
        measure.drop_database()


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--rate", type=float, default=10_000.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--snapshot", metavar="REV", help="measure ultimate_jobs/ at this commit")
    ap.add_argument("--out", type=Path, default=RESULTS / f"backfill-{time.strftime('%Y%m%d-%H%M%S')}.jsonl")
    ap.add_argument("--profile", action="store_true", help="profile one pass in this process instead")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--summary", type=Path, metavar="FILE", help="the table of a finished run's records")
    ap.add_argument("--case", choices=["baseline", "backfill"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rows < 1 or args.batch < 1:
        ap.error("--rows and --batch must be at least 1")
    args.out = args.out.resolve()
    return args


def main() -> None:
    args = parse_args()
    if args.case:
        case_main(args)
    elif args.summary:
        summary_main(args.summary)
    elif args.profile:
        profile_main(args)
    else:
        orchestrate(args)


if __name__ == "__main__":
    main()
