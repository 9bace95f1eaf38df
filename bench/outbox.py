"""The transactional outbox on PostgreSQL: staging cost, relay throughput, commit-to-start latency.

Usage::

    .venv/bin/python bench/outbox.py                         # 3 rounds of every metric
    .venv/bin/python bench/outbox.py --rounds 1 --samples 30 --metrics relay,latency

Not part of ``make test`` or ``make bench``: run it by hand against a PostgreSQL reachable as in
``bench/settings.py`` (``BENCH_PG_HOST``/``PORT``/``USER``/``PASSWORD``; each case runs on a
fresh ``bench_uj_<pid>`` database, dropped at the end).

Options (default): ``--rounds`` (3), ``--metrics`` (stage,relay,latency), ``--n`` (2,000 single
enqueues), ``--rows`` (10,000 staged rows), ``--batches`` (100,500), ``--samples`` (50),
``--out`` (``bench/results/outbox-STAMP.jsonl``).

What each metric means (every job is a no-op):

- **stage** -- ``noop.enqueue(...)`` each in its own ``transaction.atomic()`` (a staged insert
  plus its commit), N calls, against the same N direct autocommit enqueues; then one
  ``enqueue_many`` of 10,000 inside one transaction (10 staging statements and a commit).
- **relay** -- ``--rows`` rows staged in one committed transaction (untimed), the table
  analysed, then one in-process ``Relay(batch_size=B).drain()``: rows/s = rows / elapsed, for
  each batch size B. One transaction's rows publish through one relay at a time, so this is one
  relay's rate.
- **latency** -- one idle ``jobs_worker --roles worker,relay --concurrency 10`` process (the relay
  on its thread, both LISTENing); ``--samples`` single enqueues, each committed in its own
  transaction, 0.1-0.5 s apart at random. A sample is the job's first line (``time.time()``, as
  a UDP datagram) minus the moment the ``atomic()`` block returned (the commit acknowledged):
  commit -> relay wakes -> claim -> publish -> worker wakes -> claim -> start. Median and p95.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results"
METRICS = ("stage", "relay", "latency")


def measure_stage(n: int) -> dict[str, float]:
    from django.db import transaction

    from bench import measure
    from bench.jobs import noop

    measure.enqueue_one(-1)  # warm the connection
    t0 = time.perf_counter()
    for _ in range(n):
        with transaction.atomic():
            noop.enqueue(i=-1, seq=next(measure._seq))
    staged = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(n):
        measure.enqueue_one(-1)
    direct = time.perf_counter() - t0
    t0 = time.perf_counter()
    with transaction.atomic():
        noop.enqueue_many([{"i": -1, "seq": next(measure._seq)} for _ in range(10_000)])
    many = time.perf_counter() - t0
    return {"stage_single_per_s": n / staged, "direct_single_per_s": n / direct,
            "stage_many_10k_ms": many * 1000}


def measure_relay(rows: int, batch: int) -> dict[str, float]:
    from django.db import connection, transaction

    from bench import measure
    from bench.jobs import noop
    from ultimate_jobs.outbox import Relay

    with transaction.atomic():
        for start in range(0, rows, 10_000):
            noop.enqueue_many([{"i": -1, "seq": next(measure._seq)} for _ in range(min(10_000, rows - start))])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE ultimate_jobs_outboxentry")
    relay = Relay(batch_size=batch)
    t0 = time.perf_counter()
    published = relay.drain()
    elapsed = time.perf_counter() - t0
    if published != rows:
        raise RuntimeError(f"the relay published {published} of {rows} rows")
    return {f"relay_b{batch}_rows_per_s": rows / elapsed}


def measure_latency(samples: int, gap: tuple[float, float] = (0.1, 0.5), warmup: int = 3) -> dict[str, float]:
    from django.conf import settings
    from django.db import transaction

    from bench import measure
    from bench.jobs import noop

    def enqueue(i: int) -> float:
        with transaction.atomic():
            noop.enqueue(i=i, seq=next(measure._seq))
        return time.time()

    measure.LOG_DIR.mkdir(parents=True, exist_ok=True)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "BENCH_UJ_DB": settings.DATABASES["default"]["NAME"],
               "BENCH_UDP_PORT": str(sock.getsockname()[1]),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        argv = [sys.executable, "-m", "django", "jobs_worker", "--settings", "bench.settings", "--queues", "default",
                "--concurrency", "10", "--roles", "worker,relay"]
        with open(measure.LOG_DIR / "uj-bench-outbox-latency.log", "ab") as log:
            worker = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=str(ROOT))
        try:
            for k in range(warmup):  # the first also waits out the worker's start-up
                enqueue(1_000_000 + k)
                if measure._receive(sock, 1_000_000 + k, 120.0 if k == 0 else 30.0) is None:
                    raise RuntimeError("the worker never ran a warm-up job")
            lats: list[float] = []
            for i in range(samples):
                time.sleep(random.uniform(*gap))
                committed = enqueue(i)
                started = measure._receive(sock, i, 30.0)
                if started is not None:
                    lats.append((started - committed) * 1000)
        finally:
            measure.stop_workers([worker])
    if not lats:
        raise RuntimeError("no latency sample arrived")
    lats.sort()
    return {"outbox_latency_median_ms": statistics.median(lats),
            "outbox_latency_p95_ms": measure.nearest_rank(lats, 0.95),
            "outbox_latency_missed": float(samples - len(lats))}


def cases(args: argparse.Namespace) -> list[tuple[str, Callable[[], dict[str, float]]]]:
    table: dict[str, list[tuple[str, Callable[[], dict[str, float]]]]] = {
        "stage": [("stage", lambda: measure_stage(args.n))],
        "relay": [(f"relay-b{b}", lambda b=b: measure_relay(args.rows, b)) for b in args.batches],
        "latency": [("latency", lambda: measure_latency(args.samples))],
    }
    return [case for m in METRICS if m in args.metrics for case in table[m]]


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--metrics", type=lambda s: s.split(","), default=list(METRICS))
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--batches", type=lambda s: [int(b) for b in s.split(",")], default=[100, 500])
    ap.add_argument("--samples", type=int, default=50)
    ap.add_argument("--out", type=Path, default=RESULTS / f"outbox-{time.strftime('%Y%m%d-%H%M%S')}.jsonl")
    args = ap.parse_args()
    unknown = set(args.metrics) - set(METRICS)
    if unknown:
        ap.error(f"unknown metric(s) {', '.join(sorted(unknown))}; choose from {', '.join(METRICS)}")
    return args


def main() -> None:
    args = parse_args()
    from bench.run import commit, setup_django, versions

    setup_django()
    from bench import measure

    args.out.parent.mkdir(parents=True, exist_ok=True)
    print(json.dumps({**versions(), "rounds": args.rounds, "rows": args.rows, "results": str(args.out)}))
    figures: dict[str, list[float]] = defaultdict(list)
    try:
        for rnd in range(1, args.rounds + 1):
            for name, fn in cases(args):
                measure.recreate_database()
                rec: dict[str, Any] = {"case": name, "round": rnd, "commit": commit(),
                                       "ts": time.strftime("%Y-%m-%dT%H:%M:%S")}
                try:
                    rec.update(fn())
                except Exception as exc:  # one failed case must not lose the others' figures
                    rec["error"] = repr(exc)
                for key, value in rec.items():
                    if isinstance(value, float):
                        figures[key].append(value)
                print(f"round {rnd} {name:10} " + " ".join(f"{k}={v:.1f}" for k, v in rec.items()
                                                           if isinstance(v, float)) + rec.get("error", ""),
                      flush=True)
                with open(args.out, "a") as f:
                    f.write(json.dumps(rec, sort_keys=True) + "\n")
    finally:
        measure.drop_database()
    print("\nmedian over rounds:")
    for key, values in figures.items():
        print(f"  {key:28} {statistics.median(values):10.1f}   ({', '.join(f'{v:.1f}' for v in values)})")


if __name__ == "__main__":
    main()
