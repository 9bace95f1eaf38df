"""enqueue_many's Python per row, without the database: building one row and its parts, in µs.

Ad hoc, run by hand (see docs/scaling.md); not part of make bench. ``CODE=<snapshot>`` measures
another commit's tree (see _boot.py), so two commits can be compared in alternation.

Usage::

    cd bench/experiments && ../../.venv/bin/python row_cost.py [ROUNDS]
"""

# ruff: noqa: E402  (Django is set up before the app's modules are imported)

import itertools
import statistics
import sys
import time
from collections.abc import Callable

import _boot  # noqa: F401  (sets up Django on a throwaway bench database; see _boot.py)

from bench.jobs import noop
from ultimate_jobs.db.postgres.jobs import row_columns
from ultimate_jobs.ids import uuid7

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 7
N = 10_000
seq = itertools.count(10**9)
bound = noop.using()


def per_row(build: Callable[[int], object]) -> str:
    """min and median µs per row over ROUNDS rounds of N rows."""
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        build(N)
        times.append((time.perf_counter() - start) / N * 1e6)
    return f"min {min(times):5.2f}  median {statistics.median(times):5.2f}"


rows = [bound.row({"i": -1, "seq": next(seq)}) for _ in range(1000)]
cases = {
    "a row (BoundJob.row)": lambda n: [bound.row({"i": -1, "seq": next(seq)}) for _ in range(n)],
    "  its input rendered (JobHandle.render)": lambda n: [noop.render({"i": -1, "seq": next(seq)}) for _ in range(n)],
    "    its JSON (encode_input)": lambda n: [noop.encode_input({"i": -1, "seq": next(seq)}) for _ in range(n)],
    "  one id (uuid7)": lambda n: [uuid7() for _ in range(n)],
    "the statement's columns (row_columns)": lambda n: [row_columns(rows) for _ in range(n // 1000)],
}
for name, build in cases.items():
    print(f"{name:42} {per_row(build)} µs")
