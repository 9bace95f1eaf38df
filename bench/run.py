"""ultimate_jobs' own benchmark on PostgreSQL (``make bench``).

Usage::

    .venv/bin/python bench/run.py                     # 3 interleaved rounds of every metric
    .venv/bin/python bench/run.py --rounds 1 --metrics single,latency
    .venv/bin/python bench/run.py --snapshot HEAD     # measure one commit while others edit the tree
    BENCH_VENV_ROOT=/tmp/pb .venv/bin/python bench/run.py --peers   # + the peer harness, same run

Options (default): ``--rounds`` (3), ``--metrics`` (single,bulk,drain,latency), ``--n`` (2000
single enqueues), ``--drain-n`` (10,000), ``--concurrency`` (10 threads per worker), ``--samples``
(50), ``--snapshot`` (none: the working tree), ``--out`` (``bench/results/ours-STAMP.jsonl``),
``--peers`` (off), ``--peer-dir`` (``$BENCH_PEER_DIR`` or ``/work/shared/peer-bench``),
``--peer-tools`` (every peer whose venv exists under ``$BENCH_VENV_ROOT``), ``--peer-out``
(``bench/results/peers-STAMP.jsonl``).

Each case (one metric, one round) runs in a fresh process of its own, as the peer harness's cases
do, on a freshly created and migrated database ``bench_uj_<pid>`` (dropped at the end; PostgreSQL
from ``BENCH_PG_HOST``/``PORT``/``USER``/``PASSWORD``), so every case imports the code as it is
when the case starts, and its record carries that commit. ``--snapshot REV`` extracts
``ultimate_jobs/`` at ``REV`` (``git archive``) and puts it first on ``PYTHONPATH`` for our cases,
their workers and the peer harness's ``ultimate_jobs`` column, so a run measures one commit. The
table shows medians over rounds; with ``--peers`` each round also runs one round of the peer
harness (before ours in odd rounds, after in even ones), and the ratio is ours / the best peer's
median.

What each metric means (every job is a no-op, so every number is queue overhead):

- **single enqueue** -- ``noop.enqueue(...)`` outside any transaction (the direct path: one
  INSERT, its own commit), N=2000 calls after 20 untimed warm-ups; jobs/s = N / elapsed. In
  alternating blocks of 100 the same case measures the floor, the same rows' bare ``INSERT`` and
  ``COMMIT`` on a psycopg connection of its own (``floor_jobs_per_s``), and the store's statement
  sent the same way (``floor_store_sql_jobs_per_s``): the goal reads the enqueue against the floor.
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
- **relay** (``--metrics relay``) -- 20,000 rows staged in one committed transaction, then one
  in-process ``Relay(batch_size=500).drain()``: rows/s (``bench/outbox.py``'s relay case).
- **flat** and **scale** (``--metrics flat,scale``) -- the 2-worker drain and the pickup on a table
  already holding 1,000,000 ``done`` rows or 100,000 ``delayed`` rows; the drain with 1, 2, 4 and 8
  worker processes (``bench/flat.py``). ``make bench`` runs every metric and writes
  ``bench/RESULTS.md`` and ``docs/scaling-workers.png`` (``bench/results_md.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # bench.flat below; after PYTHONPATH, so a --snapshot's ultimate_jobs wins
from bench import flat  # noqa: E402

RESULTS = ROOT / "bench" / "results"
METRICS = ("single", "bulk", "drain", "latency", "relay", "flat", "scale")
DEFAULT_METRICS = ("single", "bulk", "drain", "latency")  # what the peers measure too
CASES = {"single": ["single"], "bulk": ["bulk"], "drain": ["drain-1p", "drain-2p"], "latency": ["latency"],
         "relay": ["relay"], "flat": flat.CASES["flat"], "scale": flat.CASES["scale"]}
RELAY_ROWS = 20_000
RELAY_BATCH = 500  # RELAY_BATCH_SIZE's default: what a relay does unless told otherwise


def git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def commit() -> str:
    """The code measured: the snapshot's commit, else HEAD (``+dirty`` when ``ultimate_jobs/`` differs)."""
    if os.environ.get("BENCH_UJ_COMMIT"):
        return os.environ["BENCH_UJ_COMMIT"]
    return git("rev-parse", "--short", "HEAD") + (
        "+dirty" if git("status", "--porcelain", "--", "ultimate_jobs") else ""
    )


SITECUSTOMIZE = '''"""Written by bench/run.py --snapshot: keep the measured snapshot of ultimate_jobs whole.

An editable install's finder would supply any ultimate_jobs module added to the working tree
after the snapshot's commit; without it such a module is absent, as it was at that commit.
"""

import sys

sys.meta_path[:] = [f for f in sys.meta_path if "ultimate_jobs" not in getattr(f, "__module__", "")]
'''


def snapshot(rev: str) -> tuple[str, str]:
    """Extract ``ultimate_jobs/`` at ``rev`` into a temporary directory; answer (directory, short commit).

    The directory also gets a ``sitecustomize.py`` (run at start-up by every Python that has the
    directory on ``PYTHONPATH``) that drops the editable install's import finder, which would
    otherwise supply modules added to the working tree since ``rev``.
    """
    short = git("rev-parse", "--short", rev)
    target = Path(tempfile.gettempdir()) / f"bench-uj-{short}"
    if not (target / "ultimate_jobs").is_dir():
        target.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", short, "ultimate_jobs"], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    (target / "sitecustomize.py").write_text(SITECUSTOMIZE)
    return str(target), short


def setup_django() -> None:
    """``bench.settings`` on the database named by ``BENCH_UJ_DB`` (``bench_uj_*`` only)."""
    if str(ROOT) not in sys.path:
        sys.path.append(str(ROOT))  # after PYTHONPATH, so a --snapshot's ultimate_jobs wins over the tree's
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    import django

    django.setup()


# -- one case, in its own process -------------------------------------------------------------------


def run_case(name: str, args: argparse.Namespace) -> dict[str, Any]:
    from bench import measure

    measure.recreate_database()
    if name == "single":
        return measure.measure_single(n=args.n)
    if name == "bulk":
        return measure.measure_bulk()
    if name.startswith("drain-"):
        return measure.measure_drain(int(name[6]), n=args.drain_n, concurrency=args.concurrency)
    if name == "relay":
        from bench import outbox

        got = outbox.measure_relay(RELAY_ROWS, RELAY_BATCH)
        return {"relay_rows_per_s": got[f"relay_b{RELAY_BATCH}_rows_per_s"]}
    if name.startswith(("flat-", "scale-")):
        return flat.run_case(name, n=args.drain_n, concurrency=args.concurrency, samples=args.samples)
    return measure.measure_latency(samples=args.samples)


def case_main(args: argparse.Namespace) -> None:
    """``--case NAME``: measure once and print one JSON record (what the orchestrator reads back)."""
    setup_django()
    import ultimate_jobs

    rec: dict[str, Any] = {
        "case": args.case,
        "commit": commit(),
        "code": str(Path(ultimate_jobs.__file__).parent),
    }
    try:
        rec.update(run_case(args.case, args))
    except Exception as exc:  # recorded, so one failed case does not lose the round
        rec["error"] = repr(exc)
    print(json.dumps(rec, sort_keys=True), flush=True)


# -- the orchestrator ---------------------------------------------------------------------------------


def case_argv(name: str, args: argparse.Namespace) -> list[str]:
    return [
        sys.executable,
        str(Path(__file__).resolve()),
        "--case",
        name,
        "--n",
        str(args.n),
        "--drain-n",
        str(args.drain_n),
        "--concurrency",
        str(args.concurrency),
        "--samples",
        str(args.samples),
    ]


def run_ours(
    rnd: int, metrics: list[str], args: argparse.Namespace, env: dict[str, str]
) -> list[dict[str, Any]]:
    records = []
    for name in [c for m in metrics for c in CASES[m]]:
        t0 = time.perf_counter()
        proc = subprocess.run(case_argv(name, args), env=env, capture_output=True, text=True)
        lines = proc.stdout.strip().splitlines()
        rec = {"tool": "ultimate_jobs", "round": rnd, "ts": time.strftime("%Y-%m-%dT%H:%M:%S")}
        rec.update(
            json.loads(lines[-1])
            if proc.returncode == 0 and lines
            else {"case": name, "error": f"rc={proc.returncode}: {proc.stderr[-1000:]}"}
        )
        figures = " ".join(f"{k}={v:.1f}" for k, v in rec.items() if isinstance(v, float))
        print(
            f"round {rnd} ultimate_jobs {name:9} {time.perf_counter() - t0:5.1f}s {rec.get('commit', '')} "
            f"{figures} {rec.get('error', '')}",
            flush=True,
        )
        with open(args.out, "a") as f:
            f.write(json.dumps(rec, sort_keys=True) + "\n")
        records.append(rec)
    return records


def versions() -> dict[str, str]:
    import django
    import psycopg

    from bench import measure

    return {
        "python": sys.version.split()[0],
        "django": django.get_version(),
        "psycopg": psycopg.__version__,
        "libpq": str(psycopg.pq.version()),
        "postgresql server": measure.server_version(),
        "ultimate_jobs commit": commit(),
        "machine": f"{os.cpu_count()} CPUs, {os.uname().release}",
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


def case_env(code: str | None) -> dict[str, str]:
    env = dict(os.environ)
    if code:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [code, os.environ.get("PYTHONPATH")]))
    return env


def boot_orchestrator(rev: str | None) -> str | None:
    """The orchestrating process: extract ``rev`` (when given) first on sys.path, name this
    process's benchmark database, set Django up. Answer the snapshot's path for the cases' env."""
    code = None
    if rev:
        code, os.environ["BENCH_UJ_COMMIT"] = snapshot(rev)
        sys.path.insert(0, code)
    os.environ.setdefault("BENCH_UJ_DB", f"bench_uj_{os.getpid()}")
    setup_django()
    return code


def orchestrate(args: argparse.Namespace) -> None:
    code = boot_orchestrator(args.snapshot)
    from bench import measure, peers, report

    metrics = [m for m in METRICS if m in args.metrics.split(",")]
    peer_metrics = [m for m in metrics if m in DEFAULT_METRICS]  # the peers' harness measures these
    peer_dir = args.peer_dir or peers.DEFAULT_DIR
    peer_tools = peers.available(args.peer_tools.split(",") if args.peer_tools else peers.PEERS)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    facts: dict[str, object] = {
        **versions(),
        **settings_used(args),
        "code": code or ROOT,
        "results": args.out,
    }
    if args.peers:
        facts.update(
            {"peer harness": peer_dir, "peer tools": ",".join(peer_tools), "peer results": args.peer_out}
        )
    report.print_facts("versions and settings", facts)
    env = case_env(code)
    ours: dict[str, list[float]] = defaultdict(list)
    try:
        for rnd in range(1, args.rounds + 1):
            peers_first = args.peers and rnd % 2 == 1
            if peers_first:
                peers.run_round(peer_dir, peer_tools, peer_metrics, args.peer_out, rnd, env)
            for rec in run_ours(rnd, metrics, args, env):
                for key, value in rec.items():
                    if isinstance(value, float) and "error" not in rec:
                        ours[key].append(value)
            if args.peers and not peers_first:
                peers.run_round(peer_dir, peer_tools, peer_metrics, args.peer_out, rnd, env)
    finally:
        measure.drop_database()
    peer_values = (
        peers.medians(peers.load([args.peer_out])) if args.peers and args.peer_out.exists() else None
    )
    report.print_facts("versions and settings", facts)
    report.print_results(ours, peer_values)


def parse_args() -> argparse.Namespace:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--metrics", default=",".join(DEFAULT_METRICS))
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--drain-n", type=int, default=10_000)
    ap.add_argument("--concurrency", type=int, default=10)
    ap.add_argument("--samples", type=int, default=50)
    ap.add_argument("--snapshot", metavar="REV", help="measure ultimate_jobs/ at this commit")
    ap.add_argument("--out", type=Path, default=RESULTS / f"ours-{stamp}.jsonl")
    ap.add_argument("--peers", action="store_true", help="also run the peer harness, interleaved")
    ap.add_argument("--peer-dir", type=Path, default=None)
    ap.add_argument("--peer-tools", default=None, help="comma-separated (default: every peer with a venv)")
    ap.add_argument("--peer-out", type=Path, default=RESULTS / f"peers-{stamp}.jsonl")
    ap.add_argument("--case", help=argparse.SUPPRESS)
    args = ap.parse_args()
    unknown = set(args.metrics.split(",")) - set(METRICS)
    if unknown:
        ap.error(f"unknown metric(s) {', '.join(sorted(unknown))}; choose from {', '.join(METRICS)}")
    # absolute, because the peer harness runs in its own directory
    args.out, args.peer_out = args.out.resolve(), args.peer_out.resolve()
    return args


def main() -> None:
    args = parse_args()
    if args.case:
        case_main(args)
    else:
        orchestrate(args)


if __name__ == "__main__":
    main()
