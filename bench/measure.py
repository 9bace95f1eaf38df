"""The benchmark's measurements: each one runs against a freshly migrated ``bench_uj_*`` database.

Needs Django set up with ``bench.settings`` (``bench/run.py`` does it). Timing rules: a duration is
``time.perf_counter()`` inside this process; pickup latency compares ``time.time()`` across two
processes on the same machine. Worker processes are real ``jobs_worker`` commands, started and
stopped (SIGTERM, then SIGKILL after a grace period) by the PIDs this module spawned.
"""

from __future__ import annotations

import itertools
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import psycopg

ROOT = Path(__file__).resolve().parents[1]
LOG_DIR = Path(os.environ.get("BENCH_LOG_DIR", "/tmp/bench-logs"))
# Done = the drained jobs no longer live: counted over the live rows (the claim's small partial
# indexes), so a table that already holds 1,000,000 done rows (the flat cases) is neither counted
# nor scanned every 50 ms while the workers drain.
DONE_SQL = "SELECT %(n)s - count(*) FROM ultimate_jobs_job WHERE state IN ('ready', 'running')"

_seq = itertools.count(int.from_bytes(os.urandom(4), "big") * 1_000_000)


# -- the database ---------------------------------------------------------------------------------


def dsn(db: str) -> str:
    from django.conf import settings

    conf = settings.DATABASES["default"]
    return f"postgresql://{conf['USER']}:{conf['PASSWORD']}@{conf['HOST']}:{conf['PORT']}/{db}"


def _check_ours(db: str) -> None:
    if not db.startswith("bench_uj_"):
        raise ValueError(f"refusing to touch {db!r}: only bench_uj_* databases belong to this benchmark")


def recreate_database() -> None:
    """Drop and create the benchmark database, then migrate it: every measurement starts empty."""
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connections

    db = settings.DATABASES["default"]["NAME"]
    _check_ours(db)
    connections.close_all()
    with psycopg.connect(dsn("postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{db}"')
    call_command("migrate", verbosity=0)


def drop_database() -> None:
    from django.conf import settings
    from django.db import connections

    db = settings.DATABASES["default"]["NAME"]
    _check_ours(db)
    connections.close_all()
    with psycopg.connect(dsn("postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


def server_version() -> str:
    with psycopg.connect(dsn("postgres"), autocommit=True) as conn:
        return str(conn.execute("SHOW server_version").fetchone()[0])


# -- enqueueing -------------------------------------------------------------------------------------


def enqueue_one(i: int) -> None:
    """One ``noop.enqueue`` in autocommit: the direct path, a new idempotency key every call."""
    from bench.jobs import noop

    noop.enqueue(i=i, seq=next(_seq))


def enqueue_many(n: int) -> None:
    """``noop.enqueue_many`` of ``n`` plain no-ops, in calls of at most 10,000 (the API's cap)."""
    from bench.jobs import noop

    for start in range(0, n, 10_000):
        noop.enqueue_many([{"i": -1, "seq": next(_seq)} for _ in range(min(10_000, n - start))])


# The floor of a single enqueue: the same row's bare INSERT and its COMMIT (autocommit), prepared, on
# a psycopg connection of its own -- no Python above the driver, no ON CONFLICT, no RETURNING, no wake.
FLOOR_INSERT = """
INSERT INTO ultimate_jobs_job (id, run_id, name, queue, priority, state, payload, idempotency_key, tenant_id,
                               enqueued_by, attempt, max_attempts, run_at, concurrency_key, traceparent,
                               sensitive, created_at, updated_at)
VALUES (%(id)s, %(run_id)s, %(name)s, %(queue)s, %(priority)s, 'ready', %(payload)s::jsonb, %(idempotency_key)s,
        %(tenant_id)s, %(enqueued_by)s, 0, %(max_attempts)s, now(), %(concurrency_key)s, %(traceparent)s,
        %(sensitive)s, now(), now())
"""


def _floor_params(k: int) -> list[dict[str, object]]:
    """``k`` rows exactly as ``enqueue_one`` builds them (untimed): the floor writes the same rows."""
    from bench.jobs import noop

    bound = noop.using()
    fields = ("id", "run_id", "name", "queue", "priority", "payload", "idempotency_key", "tenant_id", "enqueued_by",
              "max_attempts", "delay", "run_at", "concurrency_key", "traceparent", "sensitive")
    rows = [bound.row({"i": -1, "seq": next(_seq)}) for _ in range(k)]
    return [{f: getattr(row, f) for f in fields} for row in rows]


def measure_single(n: int = 2000, warmup: int = 20, block: int = 100) -> dict[str, float]:
    """``n`` single enqueues, one commit each, after ``warmup`` untimed ones; answer jobs/s.

    Beside them, in alternating blocks of ``block`` so both see the same moment of the machine: the
    floor (``FLOOR_INSERT``: the same rows' bare INSERT and COMMIT on psycopg, ``floor_jobs_per_s``)
    and the store's own statement sent the same way (``JOB_INSERT_ONE`` with its wake off,
    ``floor_store_sql_jobs_per_s``): the gap between the two floors is the statement's shape, the
    gap from there to ``single_jobs_per_s`` is the library's Python and Django.
    """
    from django.conf import settings

    from ultimate_jobs.db.postgres import JOB_INSERT_ONE  # re-exported there before and after the inserts module

    spent = {"single": 0.0, "floor": 0.0, "floor_store_sql": 0.0}
    with psycopg.connect(dsn(settings.DATABASES["default"]["NAME"]), autocommit=True) as conn:
        def floor(params: list[dict[str, object]]) -> None:
            for p in params:
                conn.execute(FLOOR_INSERT, p, prepare=True)

        def store_sql(params: list[dict[str, object]]) -> None:
            for p in params:
                conn.execute(JOB_INSERT_ONE, {**p, "now": None, "notify": False}, prepare=True).fetchall()

        for _ in range(warmup):
            enqueue_one(-1)
        floor(_floor_params(warmup))
        store_sql(_floor_params(warmup))
        for start in range(0, n, block):
            k = min(block, n - start)
            t0 = time.perf_counter()
            for _ in range(k):
                enqueue_one(-1)
            spent["single"] += time.perf_counter() - t0
            for name, send in (("floor", floor), ("floor_store_sql", store_sql)):
                params = _floor_params(k)
                t0 = time.perf_counter()
                send(params)
                spent[name] += time.perf_counter() - t0
    return {f"{name}_jobs_per_s": n / seconds for name, seconds in spent.items()}


def measure_bulk() -> dict[str, float]:
    """One ``enqueue_many`` of 1,000 (ms), then one of 10,000 (jobs/s); the connection is warmed first."""
    enqueue_one(-1)
    t0 = time.perf_counter()
    enqueue_many(1000)
    t1 = time.perf_counter()
    enqueue_many(10_000)
    t2 = time.perf_counter()
    return {"bulk_1k_ms": (t1 - t0) * 1000, "bulk_10k_jobs_per_s": 10_000 / (t2 - t1)}


# -- worker processes -----------------------------------------------------------------------------


def worker_argv(concurrency: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "django",
        "jobs_worker",
        "--settings",
        "bench.settings",
        "--queues",
        "default",
        "--concurrency",
        str(concurrency),
        "--roles",
        "worker",
    ]


def spawn_worker(
    concurrency: int, log_name: str, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    from django.conf import settings

    LOG_DIR.mkdir(parents=True, exist_ok=True)
    full_env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "BENCH_UJ_DB": settings.DATABASES["default"]["NAME"],
        "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(ROOT)])),
        **(env or {}),
    }
    # ``python -m`` puts its working directory first on sys.path: the log directory holds no
    # package, so PYTHONPATH decides where ultimate_jobs comes from (a --snapshot, else the tree).
    with open(LOG_DIR / log_name, "ab") as log:
        return subprocess.Popen(
            worker_argv(concurrency), env=full_env, stdout=log, stderr=subprocess.STDOUT, cwd=str(LOG_DIR)
        )


def _family(pid: int) -> list[psutil.Process]:
    try:
        proc = psutil.Process(pid)
        return [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def rss_bytes(pid: int) -> int:
    """Resident set size of one worker process and any children it started."""
    total = 0
    for proc in _family(pid):
        try:
            total += proc.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


def stop_workers(workers: list[subprocess.Popen[bytes]], grace: float = 10.0) -> None:
    """SIGTERM the workers this process spawned (by PID), then SIGKILL whatever outlives ``grace``."""
    members = [p for w in workers for p in _family(w.pid)]
    for proc in members:
        try:
            proc.send_signal(signal.SIGTERM)
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(members, timeout=grace)
    for proc in alive:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    for worker in workers:
        try:
            worker.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


@contextmanager
def running_workers(
    procs: int, concurrency: int, log_name: str, env: dict[str, str] | None = None
) -> Iterator[list[subprocess.Popen[bytes]]]:
    workers = [spawn_worker(concurrency, log_name, env) for _ in range(procs)]
    try:
        yield workers
    finally:
        stop_workers(workers)


# -- drain ------------------------------------------------------------------------------------------


def measure_drain(
    procs: int, n: int = 10_000, concurrency: int = 10, timeout: float = 600.0, poll: float = 0.05
) -> dict[str, float]:
    """Pre-enqueue ``n`` no-ops (untimed), start ``procs`` workers and poll until all ``n`` are done.

    ``drain_<procs>p_jobs_per_s`` counts from the workers' spawn (start-up included); ``..._steady``
    from the first completed job seen; ``rss_<procs>p_mib`` is the highest per-worker peak RSS.
    """
    from django.conf import settings
    from django.db import connections

    enqueue_many(n)
    connections.close_all()  # the workers' connections are the only ones held during the drain
    peaks = [0] * procs
    t_first = None
    done_first = done = 0
    last_rss = 0.0
    with psycopg.connect(dsn(settings.DATABASES["default"]["NAME"]), autocommit=True) as conn:
        t_spawn = time.perf_counter()
        with running_workers(procs, concurrency, f"uj-bench-drain-{procs}p.log") as workers:
            while True:
                done = conn.execute(DONE_SQL, {"n": n}).fetchone()[0]
                now = time.perf_counter()
                if t_first is None and done:
                    t_first, done_first = now, done
                if now - last_rss >= 0.25 or done >= n:
                    last_rss = now
                    peaks = [max(peak, rss_bytes(w.pid)) for peak, w in zip(peaks, workers, strict=True)]
                if done >= n:
                    break
                if now - t_spawn > timeout or all(w.poll() is not None for w in workers):
                    raise RuntimeError(f"drain with {procs} worker(s) stalled at {done}/{n} done")
                time.sleep(poll)
    key = f"drain_{procs}p"
    out = {f"{key}_jobs_per_s": n / (now - t_spawn), f"rss_{procs}p_mib": max(peaks) / 2**20}
    if t_first is not None and now > t_first:
        out[f"{key}_steady_jobs_per_s"] = (done - done_first) / (now - t_first)
    return out


# -- pickup latency ---------------------------------------------------------------------------------


def _receive(sock: socket.socket, want: int, timeout: float) -> float | None:
    """The start time the job ``want`` reported, or ``None`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            data = sock.recv(256)
        except TimeoutError:
            return None
        got, started = data.decode().split()
        if int(got) == want:
            return float(started)
    return None


def nearest_rank(sorted_values: list[float], q: float) -> float:
    return sorted_values[max(0, round(q * len(sorted_values)) - 1)]


def measure_latency(
    samples: int = 50, gap: tuple[float, float] = (0.1, 0.5), warmup: int = 3
) -> dict[str, float]:
    """One idle worker; ``samples`` single enqueues spaced ``gap`` seconds apart at random.

    A sample is the job's first line (its ``time.time()``, over UDP) minus the moment the enqueue
    call returned (the commit acknowledged). Answers the median and the nearest-rank p95, in ms.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        env = {"BENCH_UDP_PORT": str(sock.getsockname()[1])}
        with running_workers(1, 10, "uj-bench-latency.log", env):
            for k in range(warmup):  # the first also waits out the worker's start-up
                enqueue_one(1_000_000 + k)
                if _receive(sock, 1_000_000 + k, 120.0 if k == 0 else 30.0) is None:
                    raise RuntimeError("the worker never ran a warm-up job")
            lats: list[float] = []
            for i in range(samples):
                time.sleep(random.uniform(*gap))
                enqueue_one(i)
                returned = time.time()
                started = _receive(sock, i, 30.0)
                if started is not None:
                    lats.append((started - returned) * 1000)
    lats.sort()
    if not lats:
        raise RuntimeError("no latency sample arrived")
    return {
        "latency_median_ms": statistics.median(lats),
        "latency_p95_ms": nearest_rank(lats, 0.95),
        "latency_missed": samples - len(lats),
    }
