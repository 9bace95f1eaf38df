"""ultimate_jobs' own benchmark on PostgreSQL (``make bench``).

Usage::

    .venv/bin/python bench/run.py                     # 3 interleaved rounds of every metric
    .venv/bin/python bench/run.py --rounds 1 --metrics single,latency
    BENCH_VENV_ROOT=/tmp/pb .venv/bin/python bench/run.py --peers   # + the peer harness, same run

Options (default): ``--rounds`` (3), ``--metrics`` (single,bulk,drain,latency), ``--n`` (2000
single enqueues), ``--drain-n`` (10,000), ``--concurrency`` (10 threads per worker), ``--samples``
(50), ``--out`` (``bench/results/ours-STAMP.jsonl``), ``--peers`` (off), ``--peer-dir``
(``/work/shared/peer-bench``), ``--peer-tools`` (every peer whose venv exists under
``BENCH_VENV_ROOT``).

Each round runs every metric once, each on a fresh database ``bench_uj_<pid>`` (created, migrated,
dropped at the end; PostgreSQL from ``BENCH_PG_HOST``/``PORT``/``USER``/``PASSWORD``). The table
shows medians over rounds; with ``--peers`` each round also runs one round of the peer harness
(before ours in odd rounds, after in even ones), and the ratio is ours / the best peer's median.

What each metric means (every job is a no-op, so every number is queue overhead):

- **single enqueue** -- ``noop.enqueue(...)`` outside any transaction (the direct path: one
  INSERT, its own commit), N=2000 calls after 20 untimed warm-ups; jobs/s = N / elapsed.
- **enqueue_many 1,000 / 10,000** -- one ``enqueue_many`` call of 1,000 inputs (ms), then one of
  10,000 (jobs/s), on a fresh database with the connection already open.
- **drain 10k, 1 or 2 workers** -- 10,000 no-ops enqueued (untimed), then that many real
  ``python -m django jobs_worker --settings bench.settings --queues default --concurrency 10
  --roles worker`` processes start; the database is polled every 50 ms until all 10,000 are
  ``done``. jobs/s = 10,000 / (spawn -> last done), start-up included; "steady" counts from the
  first completion seen.
- **idle pickup latency** -- one idle worker; 50 jobs enqueued one at a time, 0.1-0.5 s apart at
  random, after 3 warm-ups. A sample is the job's first line (``time.time()``, sent as a UDP
  datagram) minus the moment ``enqueue()`` returned (the commit acknowledged). Median and
  nearest-rank p95 per round.
- **worker peak RSS** -- the highest resident set size of one worker process (10 threads),
  sampled with psutil every 250 ms during the 2-worker drain.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
METRICS = ("single", "bulk", "drain", "latency")


def setup_django() -> None:
    """``bench.settings`` on a database of this run's own (the name must start ``bench_uj_``)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    os.environ.setdefault("BENCH_UJ_DB", f"bench_uj_{os.getpid()}")
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    import django

    django.setup()


def commit() -> str:
    """The checkout's commit, ``+dirty`` when ``ultimate_jobs/`` differs from it (the venv is editable)."""

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True).stdout.strip()

    return git("rev-parse", "--short", "HEAD") + (
        "+dirty" if git("status", "--porcelain", "--", "ultimate_jobs") else ""
    )


def versions() -> dict[str, str]:
    from importlib import metadata

    import django
    import psycopg

    from bench import measure

    return {
        "python": sys.version.split()[0],
        "django": django.get_version(),
        "psycopg": psycopg.__version__,
        "libpq": str(psycopg.pq.version()),
        "postgresql server": measure.server_version(),
        "ultimate-jobs": metadata.version("ultimate-jobs"),
        "commit": commit(),
    }


def settings_used(args: argparse.Namespace) -> dict[str, object]:
    from ultimate_jobs.conf import get_settings

    conf = get_settings()
    return {
        "rounds": args.rounds,
        "single N": args.n,
        "drain N": args.drain_n,
        "worker": f"jobs_worker --queues default --concurrency {args.concurrency} --roles worker",
        "latency samples": f"{args.samples}, 0.1-0.5 s apart",
        "POLL_INTERVAL": conf.POLL_INTERVAL,
        "IDLE_POLL_MAX": conf.IDLE_POLL_MAX,
        "VISIBILITY_TIMEOUT": conf.VISIBILITY_TIMEOUT,
        "HEARTBEAT_INTERVAL": conf.HEARTBEAT_INTERVAL,
    }


def cases(metrics: list[str], args: argparse.Namespace) -> list[tuple[str, Any]]:
    """``(name, measurement)`` for one round, in run order."""
    from bench import measure

    table: dict[str, list[tuple[str, Any]]] = {
        "single": [("single", lambda: measure.measure_single(n=args.n))],
        "bulk": [("bulk", measure.measure_bulk)],
        "drain": [
            (
                f"drain-{p}p",
                lambda p=p: measure.measure_drain(p, n=args.drain_n, concurrency=args.concurrency),
            )
            for p in (1, 2)
        ],
        "latency": [("latency", lambda: measure.measure_latency(samples=args.samples))],
    }
    return [case for m in metrics for case in table[m]]


def run_ours(rnd: int, metrics: list[str], args: argparse.Namespace, out: Path) -> list[dict[str, Any]]:
    from bench import measure

    records = []
    for name, fn in cases(metrics, args):
        measure.recreate_database()
        t0 = time.perf_counter()
        rec = {
            "tool": "ultimate_jobs",
            "case": name,
            "round": rnd,
            "commit": commit(),
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }
        try:
            rec.update(fn())
        except Exception as exc:  # one failed case must not lose the others' figures
            rec["error"] = repr(exc)
        print(
            f"round {rnd} ultimate_jobs {name:10} {time.perf_counter() - t0:5.1f}s "
            + " ".join(f"{k}={v:.1f}" for k, v in rec.items() if isinstance(v, float))
            + rec.get("error", ""),
            flush=True,
        )
        with open(out, "a") as f:
            f.write(json.dumps(rec, sort_keys=True) + "\n")
        records.append(rec)
    return records


def parse_args() -> argparse.Namespace:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--metrics", default=",".join(METRICS))
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--drain-n", type=int, default=10_000)
    ap.add_argument("--concurrency", type=int, default=10)
    ap.add_argument("--samples", type=int, default=50)
    ap.add_argument("--out", type=Path, default=RESULTS / f"ours-{stamp}.jsonl")
    ap.add_argument("--peers", action="store_true", help="also run the peer harness, interleaved")
    ap.add_argument("--peer-dir", type=Path, default=None)
    ap.add_argument("--peer-tools", default=None, help="comma-separated (default: every peer with a venv)")
    ap.add_argument("--peer-out", type=Path, default=RESULTS / f"peers-{stamp}.jsonl")
    args = ap.parse_args()
    unknown = set(args.metrics.split(",")) - set(METRICS)
    if unknown:
        ap.error(f"unknown metric(s) {', '.join(sorted(unknown))}; choose from {', '.join(METRICS)}")
    return args


def main() -> None:
    args = parse_args()
    setup_django()
    from bench import measure, peers, report

    metrics = [m for m in METRICS if m in args.metrics.split(",")]
    peer_dir = args.peer_dir or peers.DEFAULT_DIR
    peer_tools = peers.available(args.peer_tools.split(",") if args.peer_tools else peers.PEERS)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    facts: dict[str, object] = {**versions(), **settings_used(args), "results": args.out}
    if args.peers:
        facts.update(
            {"peer harness": peer_dir, "peer tools": ",".join(peer_tools), "peer results": args.peer_out}
        )
    report.print_facts("versions and settings", facts)
    ours: dict[str, list[float]] = defaultdict(list)
    try:
        for rnd in range(1, args.rounds + 1):
            peers_first = args.peers and rnd % 2 == 1
            if peers_first:
                peers.run_round(peer_dir, peer_tools, metrics, args.peer_out, rnd)
            for rec in run_ours(rnd, metrics, args, args.out):
                for key, value in rec.items():
                    if isinstance(value, float) and "error" not in rec:
                        ours[key].append(value)
            if args.peers and not peers_first:
                peers.run_round(peer_dir, peer_tools, metrics, args.peer_out, rnd)
    finally:
        measure.drop_database()
    peer_values = (
        peers.medians(peers.load([args.peer_out])) if args.peers and args.peer_out.exists() else None
    )
    report.print_facts("versions and settings", facts)
    report.print_results(ours, peer_values)


if __name__ == "__main__":
    main()
