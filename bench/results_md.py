"""Write ``bench/RESULTS.md`` and the scale-out plot from one ``make bench`` run's raw records.

Usage::

    .venv/bin/python bench/results_md.py --ours bench/results/ours-STAMP.jsonl \\
        --peers bench/results/peers-STAMP.jsonl --command "make bench" [--png docs/scaling-workers.png]

Every figure is the median over the run's rounds (min-max and the count beside it), each goal of
issue 14 is checked against PgQueuer's median from the same run (the peer harness's records), and
the flat cases are compared with the empty table's figures from the same run. The commit each of
our records measured is printed; mixed commits are named.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # bench.peers, bench.flat when run as a script
PEER = "pgqueuer"  # the goals are ratios to this peer, measured in the same run


@dataclass(frozen=True, slots=True)
class Goal:
    key: str
    label: str
    unit: str
    higher: bool
    limit: float | None = None  # an absolute bound
    peer_factor: float | None = None  # a multiple of PgQueuer's median
    empty_key: str | None = None  # flat: within 10 % of this figure (same run)
    floor_key: str | None = None  # at least floor_factor of this figure (the machine's floor, same run)
    floor_factor: float = 0.9
    beats: str | None = None  # also at least every case of this tool family (e.g. "celery"), same run
    best_of_all: bool = False  # better than every peer's median, same run


# Issue 27's goals (SPEC §15 "The write path"), each judged from one run.
GOALS = [
    Goal("single_jobs_per_s", "single enqueue, N=2000", "jobs/s", True, peer_factor=1.0,
         floor_key="floor_jobs_per_s"),
    Goal("floor_jobs_per_s", "floor: the same row's bare INSERT + COMMIT on psycopg", "jobs/s", True),
    Goal("floor_store_sql_jobs_per_s", "the store's INSERT statement alone on psycopg", "jobs/s", True),
    Goal("bulk_10k_jobs_per_s", "enqueue_many 10,000", "jobs/s", True, peer_factor=1.0),
    Goal("bulk_1k_ms", "enqueue_many 1,000", "ms", False, limit=20),
    Goal("drain_2p_jobs_per_s", "drain 10k, 2 fresh workers (start-up counted)", "jobs/s", True),
    Goal("drain_2p_steady_jobs_per_s", "drain 10k, 2 workers, steady (after start-up)", "jobs/s", True,
         peer_factor=2, beats="celery"),
    Goal("drain_1p_jobs_per_s", "drain 10k, 1 worker", "jobs/s", True),
    Goal("latency_median_ms", "idle pickup, median", "ms", False, best_of_all=True),
    Goal("latency_p95_ms", "idle pickup, p95", "ms", False, best_of_all=True),
    Goal("relay_rows_per_s", "relay, outbox rows published", "rows/s", True, limit=10_000),
    Goal("rss_2p_mib", "worker peak RSS, 10 threads", "MiB", False, limit=60),
    Goal("flat_done_drain_2p_jobs_per_s", "drain 2p, 1,000,000 done rows", "jobs/s", True,
         empty_key="drain_2p_jobs_per_s"),
    Goal("flat_done_latency_median_ms", "pickup median, 1,000,000 done rows", "ms", False,
         empty_key="latency_median_ms"),
    Goal("flat_delayed_drain_2p_jobs_per_s", "drain 2p, 100,000 delayed rows", "jobs/s", True,
         empty_key="drain_2p_jobs_per_s"),
    Goal("flat_delayed_latency_median_ms", "pickup median, 100,000 delayed rows", "ms", False,
         empty_key="latency_median_ms"),
]

# What the peer harness's README says is unfair either way about the Celery columns: printed under the
# peers' table whenever a Celery case is in it.
CELERY_CAVEATS = [
    "Celery columns (`celery_redis`, `celery_rabbitmq`: `acks_late`, threads pool, no result backend; "
    "the peer harness's README lists every setting). Read them with their durability:",
    "- **Redis** here runs with no AOF and no RDB snapshots: an enqueued job lives only in memory, and a "
    "Redis restart loses every queued job. A PostgreSQL queue's enqueue returns after its commit is on "
    "disk (fsync on, synchronous_commit on).",
    "- **RabbitMQ** without publisher confirms answers once the frames are written to the socket, before "
    "the broker has the message (persistent messages reach disk later, in batches); with confirms a single "
    "enqueue ran at about a third of that in the harness's smoke run.",
    "- Both favour Celery in single and bulk enqueue. In the drain Celery keeps no row per finished job "
    "(ours keeps one, with its state and timestamps) and pays one extra Redis round trip per job for "
    "the harness's done counter (about 10 % of its steady drain). Celery has no multi-message publish: "
    "its bulk figure is a loop of publishes on one producer.",
]


def load(path: Path | None) -> list[dict[str, Any]]:
    if path is None or not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def ours_values(records: list[dict[str, Any]]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for rec in records:
        if "error" in rec:
            continue
        for key, value in rec.items():
            if isinstance(value, float | int) and not isinstance(value, bool) and key not in ("round",):
                out.setdefault(key, []).append(float(value))
    return out


def peer_values(records: list[dict[str, Any]]) -> dict[str, dict[str, list[float]]]:
    from bench import peers

    return peers.medians(r for r in records if r.get("tool") not in (None, "pgbench"))


def cell(values: list[float]) -> str:
    if not values:
        return "-"
    med = statistics.median(values)
    fmt = (lambda v: f"{v:,.0f}") if abs(med) >= 100 else (lambda v: f"{v:,.2f}")
    return f"{fmt(med)} ({fmt(min(values))}-{fmt(max(values))}, n={len(values)})"


def verdict(goal: Goal, value: float | None, peer: float | None, empty: float | None,
            others: dict[str, dict[str, list[float]]] | None = None,
            floor: float | None = None) -> tuple[str, str]:
    if value is None:
        return "-", "not measured"
    notes, ok = [], True
    if goal.limit is not None:
        ok &= value >= goal.limit if goal.higher else value <= goal.limit
        notes.append(f"{'>=' if goal.higher else '<='} {goal.limit:g}")
    if goal.peer_factor is not None:
        notes.append(f">= {goal.peer_factor:g}x {PEER}")
        if not peer:
            return " and ".join(notes), f"not judged: no {PEER} figure in this run"
        ok &= value >= goal.peer_factor * peer
    if goal.floor_key is not None:
        notes.append(f">= {goal.floor_factor:g}x the floor")
        if not floor:
            return " and ".join(notes), "not judged: no floor figure in this run"
        ok &= value >= goal.floor_factor * floor
    if goal.beats is not None or goal.best_of_all:
        family = goal.beats or ""
        medians = {case: statistics.median(v) for case, v in (others or {}).items()
                   if v and case.startswith(family) and not case.startswith("ultimate_jobs")}
        notes.append(f"beats every {goal.beats} case" if goal.beats else "best of every peer")
        if not medians:
            return " and ".join(notes), f"not judged: no {family or 'peer'} figure in this run"
        ok &= all(value >= m if goal.higher else value <= m for m in medians.values())
    if goal.empty_key is not None:
        notes.append("within 10 % of the empty table")
        if not empty:
            return " and ".join(notes), "not judged: no empty-table figure in this run"
        ok &= (value >= 0.9 * empty) if goal.higher else (value <= 1.1 * empty)
    if not notes:
        return "", ""
    return " and ".join(notes), "met" if ok else "MISSED"


def table(ours: dict[str, list[float]], peer: dict[str, dict[str, list[float]]]) -> list[str]:
    """The goals: our own cases (``bench/run.py``), and beside them the peer harness's own
    ``ultimate_jobs`` adapter where it measures the same figure (the issue names that adapter, a
    plain ``jobs_worker --concurrency 10``, for the drain), each judged against PgQueuer."""
    lines = ["| figure | ultimate_jobs, bench/run.py (min-max, rounds) | ultimate_jobs, peer harness | "
             "PgQueuer median | ratio (ours; harness) | goal | verdict (ours; harness) |",
             "|---|---|---|---|---|---|---|"]
    for goal in GOALS:
        values = ours.get(goal.key, [])
        value = statistics.median(values) if values else None
        harness = peer.get(goal.key, {}).get("ultimate_jobs", [])
        hvalue = statistics.median(harness) if harness else None
        p = peer.get(goal.key, {}).get(PEER, [])
        pmed = statistics.median(p) if p else None
        empty_values = ours.get(goal.empty_key or "", [])
        empty = statistics.median(empty_values) if empty_values else None
        floor_values = ours.get(goal.floor_key or "", [])
        floor = statistics.median(floor_values) if floor_values else None
        others = peer.get(goal.key, {})
        if goal.empty_key is not None:
            ratio = f"{value / empty:.2f}x empty" if value is not None and empty else "-"
        else:
            ratio = "; ".join(f"{v / pmed:.2f}x" if v is not None and pmed else "-" for v in (value, hvalue))
            if floor and value is not None:
                ratio += f" ({value / floor:.2f}x the floor)"
        text, ok = verdict(goal, value, pmed, empty, others, floor)
        if hvalue is not None and goal.empty_key is None and goal.floor_key is None and ok:
            ok = f"{ok}; {verdict(goal, hvalue, pmed, None, others)[1]}"
        lines.append(f"| {goal.label} ({goal.unit}) | {cell(values)} | {cell(harness)} | {cell(p)} | {ratio} | "
                     f"{text} | {ok} |")
    return lines


def peers_table(peer: dict[str, dict[str, list[float]]]) -> list[str]:
    keys = ["single_jobs_per_s", "bulk_10k_jobs_per_s", "bulk_1k_ms", "drain_2p_jobs_per_s",
            "drain_2p_steady_jobs_per_s", "drain_1p_jobs_per_s", "latency_median_ms", "latency_p95_ms", "rss_2p_mib"]
    tools = sorted({tool for key in keys for tool in peer.get(key, {})})
    lines = ["| tool | " + " | ".join(keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for tool in tools:
        lines.append(f"| {tool} | " + " | ".join(cell(peer.get(k, {}).get(tool, [])) for k in keys) + " |")
    return lines


def plot(ours: dict[str, list[float]], png: Path) -> bool:
    """jobs/s against worker processes (the scale cases); answer whether a PNG was written."""
    from bench.flat import SCALE_PROCS

    points = [(p, statistics.median(ours[f"scale_{p}p_jobs_per_s"])) for p in SCALE_PROCS
              if ours.get(f"scale_{p}p_jobs_per_s")]
    if not points:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    ax.plot([p for p, _ in points], [v for _, v in points], marker="o", label="ultimate_jobs, 10 threads each")
    ax.set_xlabel("worker processes (one PostgreSQL)")
    ax.set_ylabel("no-op jobs drained per second")
    ax.set_xticks([p for p, _ in points])
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.set_title("Drain of 10,000 no-op jobs against worker processes")
    ax.legend()
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png)
    plt.close(fig)
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--ours", type=Path, nargs="+", required=True, help="one run's records (or several runs')")
    ap.add_argument("--peers", type=Path, nargs="*", default=[])
    ap.add_argument("--command", action="append", help="the command(s) that made the records (default: make bench)")
    ap.add_argument("--note", action="append", default=[], help="a line printed under the header")
    ap.add_argument("--png", type=Path, default=ROOT / "docs" / "scaling-workers.png")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "RESULTS.md")
    args = ap.parse_args()
    records = [rec for path in args.ours for rec in load(path)]
    ours = ours_values(records)
    peer = peer_values([rec for path in args.peers for rec in load(path)])
    commits = sorted({str(r.get("commit")) for r in records if r.get("commit")})
    plotted = plot(ours, args.png)
    rel = lambda p: p.resolve().relative_to(ROOT) if p.resolve().is_relative_to(ROOT) else p  # noqa: E731
    lines = [
        "# ultimate_jobs benchmark results",
        "",
        f"Written by `bench/results_md.py` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        f"Code measured: **{', '.join(commits) or 'unknown'}** (each record carries its commit).",
        "",
        "How it was run:",
        "",
        "```sh",
        *(args.command or ["make bench"]),
        "```",
        *([""] + args.note if args.note else []),
        "",
        "Raw records: " + ", ".join(f"`{rel(p)}`" for p in args.ours) + " (ours)"
        + (", " + ", ".join(f"`{rel(p)}`" for p in args.peers) + " (the peer harness, same run)." if args.peers
           else "."),
        "Metric definitions: `bench/run.py`'s docstring (the peers' harness measures the same four: "
        "`/work/shared/peer-bench/README.md`); flat and scale cases: `bench/flat.py`; relay: `bench/outbox.py`.",
        "Every job is a no-op: each figure is queue overhead. Ratios are ours over PgQueuer's median from the "
        "same run (and, for the single enqueue, over the floor from the same run: how close to the machine's "
        "limit); flat figures are over our own empty-table figure from the same run.",
        "",
        "## Goals (issue 27; SPEC §15 \"The write path\")",
        "",
        *table(ours, peer),
        "",
        "## Every peer, same run (median (min-max, rounds))",
        "",
        *(peers_table(peer) if peer else ["(no peer records in this run)"]),
        *(["", *CELERY_CAVEATS] if any(t.startswith("celery") for v in peer.values() for t in v) else []),
        "",
        "## Scale-out",
        "",
        (f"![jobs/s against worker processes]({Path('..') / rel(args.png)})" if plotted
         else "(no scale cases in this run)"),
        "",
        "| worker processes | jobs/s, median (min-max, rounds) |",
        "|---|---|",
        *[f"| {p} | {cell(ours.get(f'scale_{p}p_jobs_per_s', []))} |" for p in (1, 2, 4, 8)],
        "",
    ]
    args.out.write_text("\n".join(lines))
    print(f"wrote {args.out}" + (f" and {args.png}" if plotted else ""))


if __name__ == "__main__":
    main()
