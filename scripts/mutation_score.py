#!/usr/bin/env python
"""Print the mutation score of each mutated module from mutmut's results (``make mutation`` runs it).

Reads ``mutants/**/*.py.meta`` under the directory given (default: ``build/mutation``, where the
target runs mutmut) and prints one row per module: mutants, killed (a test failed, or it timed
out), survived, no tests, not checked, and the score = killed / (mutants - not checked). Timeouts
count as killed, as mutmut counts them: the mutant made a covering test hang.

``--sample FILE`` (repeatable) counts only the mutants named in FILE (one name a line): the score
of a sampled run (``mutmut run <names...>``), for when a full run does not fit the time there is.

Usage::

    .venv/bin/python scripts/mutation_score.py [build/mutation] [--sample names.txt ...]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

KILLED = {"killed", "timeout", "caught by type check", "segfault"}


def status(exit_code: int | None) -> str:
    from mutmut.stats import status_by_exit_code

    return status_by_exit_code[exit_code]


def scores(root: Path, only: set[str] | None = None) -> list[tuple[str, Counter[str]]]:
    rows = []
    for meta in sorted((root / "mutants").rglob("*.py.meta")):
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        counted: Counter[str] = Counter()
        for name, exit_code in codes.items():
            if only is not None and name not in only:
                continue
            kind = status(exit_code)
            counted["killed" if kind in KILLED else kind] += 1
        if counted:
            rows.append((meta.relative_to(root / "mutants").as_posix().removesuffix(".meta"), counted))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("root", nargs="?", default="build/mutation", type=Path)
    parser.add_argument("--sample", action="append", default=[], type=Path, help="count only the names in FILE")
    args = parser.parse_args()
    only = {name for path in args.sample for name in path.read_text().split()} if args.sample else None
    print(f"{'module':<32} {'mutants':>7} {'killed':>6} {'survived':>8} {'no tests':>8} {'unchecked':>9} {'score':>6}")
    for module, counted in scores(args.root, only):
        total = sum(counted.values())
        checked = total - counted["not checked"]
        score = f"{100 * counted['killed'] / checked:.1f}%" if checked else "-"
        print(f"{module:<32} {total:>7} {counted['killed']:>6} {counted['survived']:>8} {counted['no tests']:>8} "
              f"{counted['not checked']:>9} {score:>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
