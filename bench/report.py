"""The benchmark's table: our medians over rounds, the best peer measured in the same run, the goals.

Printed with ``rich`` when it is installed, else as plain aligned text.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from . import peers


@dataclass(frozen=True, slots=True, kw_only=True)
class Metric:
    key: str
    label: str
    unit: str
    higher_is_better: bool
    goal: float | None = None
    peer_factor: float | None = None  # the goal also asks for this multiple of the best peer

    def meets(self, value: float, best_peer: float | None) -> bool | None:
        if self.goal is None:
            return None
        ok = value >= self.goal if self.higher_is_better else value <= self.goal
        if self.peer_factor is not None and best_peer is not None:
            ok = ok and value >= self.peer_factor * best_peer
        return ok

    def goal_text(self) -> str:
        if self.goal is None:
            return ""
        text = f"{'>=' if self.higher_is_better else '<='} {self.goal:,g}"
        return text + (f" and >= {self.peer_factor:g}x best peer" if self.peer_factor else "")


# Issue 27's goals where the console can judge them (the best peer stands in for PgQueuer; the full
# verdicts, floor and Celery included, are bench/results_md.py's in bench/RESULTS.md).
METRICS = [
    Metric(key="single_jobs_per_s", label="single enqueue, N=2000", unit="jobs/s", higher_is_better=True,
           goal=0, peer_factor=1),
    Metric(key="floor_jobs_per_s", label="floor: bare INSERT + COMMIT, same rows", unit="jobs/s",
           higher_is_better=True),
    Metric(key="floor_store_sql_jobs_per_s", label="the store's INSERT alone", unit="jobs/s", higher_is_better=True),
    Metric(key="bulk_1k_ms", label="enqueue_many 1,000", unit="ms", higher_is_better=False, goal=20),
    Metric(key="bulk_10k_jobs_per_s", label="enqueue_many 10,000", unit="jobs/s", higher_is_better=True, goal=0,
           peer_factor=1),
    Metric(key="drain_1p_jobs_per_s", label="drain 10k, 1 worker", unit="jobs/s", higher_is_better=True),
    Metric(key="drain_2p_jobs_per_s", label="drain 10k, 2 workers", unit="jobs/s", higher_is_better=True),
    Metric(key="drain_2p_steady_jobs_per_s", label="drain 10k, 2 workers, steady", unit="jobs/s",
           higher_is_better=True, goal=0, peer_factor=2),
    Metric(key="latency_median_ms", label="idle pickup, median", unit="ms", higher_is_better=False),
    Metric(key="latency_p95_ms", label="idle pickup, p95", unit="ms", higher_is_better=False),
    Metric(key="rss_2p_mib", label="worker peak RSS, 10 threads", unit="MiB", higher_is_better=False, goal=60),
]


def fmt(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.2f}"


def spread(values: list[float]) -> str:
    return f"{fmt(statistics.median(values))} ({fmt(min(values))}-{fmt(max(values))}, n={len(values)})"


def rows(
    ours: dict[str, list[float]], peer_values: dict[str, dict[str, list[float]]] | None
) -> list[list[str]]:
    out = []
    for m in METRICS:
        values = ours.get(m.key) or []
        med = statistics.median(values) if values else None
        found = peers.best(peer_values.get(m.key, {}), m.higher_is_better) if peer_values else None
        ok = m.meets(med, found[1] if found else None) if med is not None else None
        row = [f"{m.label} ({m.unit})", spread(values) if values else "-"]
        if peer_values is not None:
            row += [
                f"{fmt(found[1])} {found[0]}" if found else "-",
                f"{med / found[1]:.2f}x" if found and med is not None and found[1] else "-",
            ]
        row += [m.goal_text(), {True: "met", False: "MISSED", None: ""}[ok]]
        out.append(row)
    return out


def print_table(title: str, header: list[str], body: list[list[str]]) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
        print(f"\n{title}")
        for r in [header, *body]:
            print("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)))
        return
    table = Table(title=title, title_justify="left")
    for name in header:
        table.add_column(name)
    for r in body:
        table.add_row(*r)
    Console(width=200).print(table)


def print_results(
    ours: dict[str, list[float]], peer_values: dict[str, dict[str, list[float]]] | None
) -> None:
    header = ["metric", "ultimate_jobs median (min-max, rounds)"]
    if peer_values is not None:
        header += ["best peer (median)", "ours / best peer"]
    header += ["goal", ""]
    print_table("ultimate_jobs benchmark (lower is better for ms and MiB)", header, rows(ours, peer_values))


def print_facts(title: str, facts: dict[str, object]) -> None:
    print_table(title, ["", ""], [[k, str(v)] for k, v in facts.items()])
