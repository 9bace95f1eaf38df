"""Markdown tables from a finished run's JSON lines (what ``bench/RESULTS.md`` quotes).

Usage::

    .venv/bin/python bench/summary.py bench/results/ours-STAMP.jsonl bench/results/peers-STAMP.jsonl

Prints: every tool's median (min-max, rounds) per metric, then our figures against the best peer
of the same run and against the goals, with how far each missed goal is. Our own rows come from
``bench/run.py`` records; the peer harness's ``ultimate_jobs`` column (its adapter, same code) is
shown beside them as a cross-check and is never counted as a peer.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

if __package__ in (None, ""):
    sys.path.append(str(Path(__file__).resolve().parents[1]))

from bench import peers  # noqa: E402
from bench.report import METRICS, Metric, fmt  # noqa: E402

OURS = "ultimate_jobs (bench/run.py)"


def load(paths: list[str]) -> dict[str, dict[str, list[float]]]:
    """``{metric key: {row label: [value per round]}}`` over our records and the harness's."""
    values: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    harness = []
    for path in paths:
        for line in Path(path).read_text().splitlines():
            rec = json.loads(line) if line.strip() else {}
            if "case" in rec and "metric" not in rec:  # bench/run.py
                if "error" not in rec:
                    for key, value in rec.items():
                        if isinstance(value, float):
                            values[key][OURS].append(value)
            elif rec.get("tool") not in (None, "pgbench"):
                harness.append(rec)
    for key, cases in peers.medians(harness).items():
        for label, vals in cases.items():
            values[key][label].extend(vals)
    return values


def cell(vals: list[float]) -> str:
    if not vals:
        return "-"
    return f"{fmt(statistics.median(vals))} ({fmt(min(vals))}-{fmt(max(vals))}, n={len(vals)})"


def tools_table(values: dict[str, dict[str, list[float]]], metrics: list[Metric]) -> str:
    labels = sorted({label for m in metrics for label in values.get(m.key, {})}, key=lambda s: (s != OURS, s))
    head = "| tool | " + " | ".join(f"{m.label} ({m.unit})" for m in metrics) + " |"
    lines = [head, "|" + "---|" * (len(metrics) + 1)]
    for label in labels:
        lines.append(
            f"| {label} | " + " | ".join(cell(values.get(m.key, {}).get(label, [])) for m in metrics) + " |"
        )
    return "\n".join(lines)


def shortfall(m: Metric, value: float, best_peer: float | None) -> str:
    """How far a value is from its goal: met, or the factor it has to improve by."""
    target = m.goal
    if target is None:
        return ""
    if m.peer_factor is not None and best_peer is not None:
        target = max(target, m.peer_factor * best_peer)
    if (value >= target) if m.higher_is_better else (value <= target):
        return "met"
    factor = target / value if m.higher_is_better else value / target
    return f"missed: {fmt(value)} vs {fmt(target)} ({factor:.1f}x short)"


def goals_table(values: dict[str, dict[str, list[float]]]) -> str:
    lines = [
        "| metric | ultimate_jobs (bench/run.py) | ultimate_jobs (harness adapter) | best peer | ours / best "
        "peer | goal | status |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in METRICS:
        cases = values.get(m.key, {})
        ours = cases.get(OURS, [])
        adapter = next(
            (v for k, v in cases.items() if k == peers.OURS or k.startswith(peers.OURS + " [")), []
        )
        found = peers.best(cases, m.higher_is_better)
        med = statistics.median(ours) if ours else None
        ratio = f"{med / found[1]:.2f}x" if med is not None and found else "-"
        status = shortfall(m, med, found[1] if found else None) if med is not None else "-"
        best = f"{fmt(found[1])} ({found[0]})" if found else "-"
        lines.append(
            f"| {m.label} ({m.unit}) | {cell(ours)} | {cell(adapter)} | {best} | {ratio} | "
            f"{m.goal_text()} | {status} |"
        )
    return "\n".join(lines)


def main(paths: list[str]) -> None:
    values = load(paths)
    split = [m for m in METRICS if m.unit != "ms" and not m.key.startswith("rss")]
    rest = [m for m in METRICS if m not in split]
    print("### Every tool: median (min-max, rounds)\n")
    print(tools_table(values, split) + "\n")
    print(tools_table(values, rest) + "\n")
    print("### ultimate_jobs against the best peer and the goals (ms and MiB: lower is better)\n")
    print(goals_table(values))


if __name__ == "__main__":
    main(sys.argv[1:])
