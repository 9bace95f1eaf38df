#!/usr/bin/env python
"""Print the mutation score of each mutated module from mutmut's results (``make mutation`` runs it).

Reads ``mutants/**/*.py.meta`` under the directory given (default: ``build/mutation``, where the
target runs mutmut) and prints one row per module: mutants, killed (a test failed, or it timed
out), survived, no tests, not checked, and the score = killed / (mutants - not checked). Timeouts
count as killed, as mutmut counts them: the mutant made a covering test hang.

Usage::

    .venv/bin/python scripts/mutation_score.py [build/mutation]
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

KILLED = {"killed", "timeout", "caught by type check", "segfault"}


def status(exit_code: int | None) -> str:
    from mutmut.stats import status_by_exit_code

    return status_by_exit_code[exit_code]


def scores(root: Path) -> list[tuple[str, Counter[str]]]:
    rows = []
    for meta in sorted((root / "mutants").rglob("*.py.meta")):
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        counted: Counter[str] = Counter()
        for exit_code in codes.values():
            kind = status(exit_code)
            counted["killed" if kind in KILLED else kind] += 1
        rows.append((meta.relative_to(root / "mutants").as_posix().removesuffix(".meta"), counted))
    return rows


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "build/mutation")
    print(f"{'module':<32} {'mutants':>7} {'killed':>6} {'survived':>8} {'no tests':>8} {'unchecked':>9} {'score':>6}")
    for module, counted in scores(root):
        total = sum(counted.values())
        checked = total - counted["not checked"]
        score = f"{100 * counted['killed'] / checked:.1f}%" if checked else "-"
        print(f"{module:<32} {total:>7} {counted['killed']:>6} {counted['survived']:>8} {counted['no tests']:>8} "
              f"{counted['not checked']:>9} {score:>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
