"""Backfill pass variants, interleaved: what would cutting the per-page writes buy?

Ad hoc, run by hand (see bench/RESULTS.md, "Backfill sweep"); not part of make bench. Every
variant runs in this one process, on a fresh table each time (``bench/backfill.py``'s
``prepare``), in an order rotated per round. Monkeypatches internals of ``ultimate_jobs`` in this
process only, so it tracks the code it was written against (006862a):

- ``loop``: the hand-written keyset loop (``bench/backfill.py``'s baseline);
- ``backfill``: the pass as it is, on an in-process ``Worker``;
- ``no ledger progress``: ``Ledger.progress`` a no-op (the upper bound of writing the ledger at
  most once a second instead of once a page);
- ``atomic pages``: every ``batch:<n>`` step run with ``atomic=True``, so the handle's UPDATE,
  the ledger UPDATE and the checkpoint commit together (one commit a page instead of three);
- ``both``: atomic pages and no ledger progress.

Usage: ``.venv/bin/python bench/experiments/backfill_knobs.py [ROWS] [ROUNDS]`` (100,000 rows, 5).
"""

# ruff: noqa: E402  (Django is set up before the app's modules are imported)

import os
import statistics
import sys
import time

import _boot  # noqa: F401  (sets up Django on a throwaway bench database; see _boot.py)

from bench import backfill as bench_backfill
from bench import measure
from ultimate_jobs.factories.backfill import ledger as backfill_ledger
from ultimate_jobs.runtime import steps

rows = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
model, sweep = bench_backfill.declare(1000, 10_000.0)
original_progress = backfill_ledger.Ledger.progress
original_run = steps.Steps.run


def atomic_run(self, name, fn, **kw):
    if name.startswith("batch:"):
        kw["atomic"] = True
    return original_run(self, name, fn, **kw)


def loop():
    start = time.perf_counter()
    bench_backfill.sweep_by_hand(model, 1000)
    return start, time.perf_counter()


def pass_with(progress=original_progress, run=original_run):
    backfill_ledger.Ledger.progress, steps.Steps.run = progress, run
    try:
        done = bench_backfill.sweep_by_backfill(sweep)
    finally:
        backfill_ledger.Ledger.progress, steps.Steps.run = original_progress, original_run
    return done["start"], done["end"]


VARIANTS = {
    "loop": loop,
    "backfill": pass_with,
    "no ledger progress": lambda: pass_with(progress=lambda self, run_id, **kw: None),
    "atomic pages": lambda: pass_with(run=atomic_run),
    "both": lambda: pass_with(progress=lambda self, run_id, **kw: None, run=atomic_run),
}
names = list(VARIANTS)
res = {k: [] for k in VARIANTS}
try:
    for r in range(rounds):
        for name in names[r % len(names):] + names[: r % len(names)]:
            bench_backfill.prepare(model, rows)
            bench_backfill.PAGES.clear()
            start, end = VARIANTS[name]()
            fig = bench_backfill.figures("x", start, end, rows)
            res[name].append(fig)
            print(r, f"{name:20} {fig['x_rows_per_s']:9,.0f} rows/s  batch {fig['x_batch_ms']:6.2f} ms  "
                  f"UPDATE {fig['x_update_ms']:5.2f} ms  outside the UPDATE {fig['x_outside_ms']:5.2f} ms  "
                  f"load {os.getloadavg()[0]:.2f}", flush=True)
finally:
    measure.drop_database()

print(f"\n{rows:,} rows, {rounds} rounds; ratio = median over rounds of variant / loop (rows/s), "
      "diff = median over rounds of variant - loop (ms per batch)")
for name, figs in res.items():
    ratio = [f["x_rows_per_s"] / b["x_rows_per_s"] for f, b in zip(figs, res["loop"], strict=True)]
    diff = [f["x_batch_ms"] - b["x_batch_ms"] for f, b in zip(figs, res["loop"], strict=True)]
    upd = [f["x_update_ms"] - b["x_update_ms"] for f, b in zip(figs, res["loop"], strict=True)]
    out = [f["x_outside_ms"] - b["x_outside_ms"] for f, b in zip(figs, res["loop"], strict=True)]
    print(f"  {name:20} {statistics.median(f['x_rows_per_s'] for f in figs):9,.0f} rows/s  "
          f"{statistics.median(ratio):.3f}x ({min(ratio):.3f}-{max(ratio):.3f})  "
          f"wall/batch {statistics.median(diff):+.2f} ms  UPDATE {statistics.median(upd):+.2f} ms  "
          f"outside the UPDATE {statistics.median(out):+.2f} ms")
