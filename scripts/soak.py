#!/usr/bin/env python
"""The soak test: a worker fleet under a killer, minutes long; run by ``make soak`` (not ``make test``).

What it does:

1. creates its own PostgreSQL database ``uj_soak_<pid>`` and migrates it (tests/settings.py, so
   the fleet runs the suite's ``tests.soak.steps`` job: three durable steps, each writing one
   ``Effect``; two of them ``atomic``, so their effect commits with their checkpoint);
2. starts ``--workers`` (4) ``jobs_worker`` processes and feeds ``--jobs`` (20,000) jobs at an even
   rate over the first 80% of ``--minutes`` (5), so the fleet is under load for the whole run
   (``--all-at-once`` enqueues them up front instead);
3. a killer strikes every ``--every`` (2-5) seconds at random: SIGKILL a worker (restarted at
   once), SIGTERM a worker (it drains; a replacement starts at once), or ``pg_terminate_backend``
   every session on the soak database (the fleet's, and the script's own);
4. the killer stops after ``--minutes`` (or earlier, once every job is enqueued and terminal); the
   fleet then gets ``--grace`` (120 s) without chaos to finish; the workers are stopped with SIGTERM;
5. it checks the invariants, prints a summary table and drops the database (``--keep-db`` keeps it).

Invariants (any violation: exit 1): every enqueued job exists and is ``done``; every done job's
three steps are ``completed`` once (one ``JobStep`` row each) and each step's effect exists; an
``atomic`` step's effect exists exactly once (no step completed twice); every SIGTERMed worker
exits 0 and no worker exits on its own. Duplicate executions of the non-atomic step are
at-least-once, so they are a figure, not a violation.

Usage::

    make soak                                    # the defaults
    make soak SOAK_ARGS='--minutes 2 --jobs 5000'
    .venv/bin/python scripts/soak.py --help

Environment: ``DATABASE_URL`` (postgres://postgres@127.0.0.1:5432/), ``SOAK_SETTINGS``
(``tests.settings``: the settings module the script and the workers load; it must register the
``tests.app`` jobs and read ``JOBS_TEST_DB_NAME``/``JOBS_TEST_VISIBILITY`` as tests/settings.py does).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
STEPS = ("reserve", "charge", "notify")
ATOMIC = ("reserve", "notify")
TERMINAL = ("done", "dead", "failed", "cancelled")
LOG_EVENTS = ("jobs.lease.rescued", "jobs.lease.lost", "jobs.worker.tick-failed", "jobs.worker.settle-failed",
              "jobs.settle.unowned", "jobs.heartbeat.failed", "jobs.listen.lost", "jobs.worker.drain-abandoned",
              "jobs.attempt.failed", "jobs.step.lost", "jobs.run.cancelled", "jobs.claim.reconciled")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=5.0, help="the killer's time bound (5)")
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs enqueued (20000)")
    parser.add_argument("--workers", type=int, default=4, help="worker processes (4)")
    parser.add_argument("--concurrency", type=int, default=8, help="slots per worker (8)")
    parser.add_argument("--every", default="2-5", help="seconds between strikes, min-max (2-5)")
    parser.add_argument("--visibility", default="5s", help="the fleet's visibility timeout (5s)")
    parser.add_argument("--drain-timeout", default="10s", help="the workers' --drain-timeout (10s)")
    parser.add_argument("--pause-ms", type=float, default=2.0, help="sleep inside each step's write, ms (2)")
    parser.add_argument("--grace", type=float, default=120.0,
                        help="seconds to finish once the killer stops (120)")
    parser.add_argument("--all-at-once", action="store_true",
                        help="enqueue every job before the killer starts")
    parser.add_argument("--seed", type=int, default=None, help="the killer's random seed")
    parser.add_argument("--keep-db", action="store_true", help="keep the soak database for inspection")
    parser.add_argument("--logs", default=None, help="directory for the workers' logs (/tmp/uj-soak-<stamp>)")
    return parser.parse_args(argv)


# -- the database ------------------------------------------------------------------------------------------


def server_params() -> dict[str, object]:
    url = urlparse(os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/postgres")
    return {"host": url.hostname or "127.0.0.1", "port": url.port or 5432, "user": url.username or "postgres",
            "password": url.password or ""}


def admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(dbname="postgres", autocommit=True, connect_timeout=10, **server_params()) as conn:
        conn.execute(sql)


# -- the fleet ---------------------------------------------------------------------------------------------


@dataclass
class Fleet:
    env: dict[str, str]
    log_dir: Path
    concurrency: int
    drain_timeout: str
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    draining: list[subprocess.Popen[bytes]] = field(default_factory=list)
    all_procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    drain_exits: Counter[int] = field(default_factory=Counter)  # workers the killer SIGTERMed
    stop_exits: Counter[int] = field(default_factory=Counter)  # the fleet stopped at the end
    sigtermed: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: dict[int, Path] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, *, restart: bool = True) -> subprocess.Popen[bytes]:
        n = len(self.all_procs)
        path = self.log_dir / f"worker-{n:03d}.log"
        log = open(path, "wb")  # noqa: SIM115 (the child owns it)
        proc = subprocess.Popen(
            [sys.executable, "-m", "django", "jobs_worker", "--settings", self.env["DJANGO_SETTINGS_MODULE"],
             "-v", "2", "--roles", "worker", "--concurrency", str(self.concurrency),
             "--drain-timeout", self.drain_timeout],
            cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.logs[proc.pid] = path
        self.all_procs.append(proc)
        self.procs.append(proc)
        if restart:
            self.counts["restarts"] += 1
        return proc

    def reap(self) -> None:
        """Restart workers that died on their own; collect the exit codes of drained ones."""
        with self.lock:
            for proc in list(self.procs):
                if proc.poll() is not None:
                    self.procs.remove(proc)
                    self.counts["unexpected_exits"] += 1
                    self.start()
            for proc in list(self.draining):
                if proc.poll() is not None:
                    self.draining.remove(proc)
                    self.drain_exits[proc.returncode] += 1

    def sigkill(self, rng: random.Random) -> None:
        with self.lock:
            victim = rng.choice(self.procs)
            victim.send_signal(signal.SIGKILL)
            victim.wait(30)
            self.procs.remove(victim)
            self.counts["sigkill"] += 1
            self.start()

    def started(self, proc: subprocess.Popen[bytes]) -> bool:
        """Whether the worker got as far as its loop (its SIGTERM handler is installed by then)."""
        return b"jobs.worker.started" in self.logs[proc.pid].read_bytes()

    def sigterm(self, rng: random.Random) -> None:
        with self.lock:
            running = [p for p in self.procs if self.started(p)]
            if not running:  # all still booting: a SIGTERM would only test Python's default handler
                self.counts["sigterm_skipped"] += 1
                return
            victim = rng.choice(running)
            victim.send_signal(signal.SIGTERM)
            self.procs.remove(victim)
            self.draining.append(victim)
            self.sigtermed.append(victim)
            self.counts["sigterm"] += 1
            self.start()

    def stop(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + 30
        booting = [p for p in self.procs if p.poll() is None and not self.started(p)]
        while booting and time.monotonic() < deadline:
            time.sleep(0.2)  # a worker restarted a moment ago finishes booting first
            booting = [p for p in booting if p.poll() is None and not self.started(p)]
        with self.lock:
            for proc in self.procs:
                proc.send_signal(signal.SIGTERM)
            self.draining.extend(self.procs)
            self.procs.clear()
        deadline = time.monotonic() + timeout
        for proc in list(self.draining):
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
            (self.drain_exits if proc in self.sigtermed else self.stop_exits)[proc.returncode] += 1
        self.draining.clear()

    def kill_all(self) -> None:
        for proc in self.all_procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


def terminate_sessions(database: str) -> int:
    """``pg_terminate_backend`` every other session on the soak database: the fleet's connections."""
    import psycopg

    with psycopg.connect(dbname=database, autocommit=True, connect_timeout=10, **server_params()) as conn:
        row = conn.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                           "WHERE datname = current_database() AND pid <> pg_backend_pid()").fetchone()
    return int(row[0]) if row else 0


def killer(fleet: Fleet, database: str, rng: random.Random, every: tuple[float, float], stop: threading.Event,
           timeline: list[str]) -> None:
    begin = time.monotonic()
    while not stop.wait(rng.uniform(*every)):
        action = rng.choices(("sigkill", "sigterm", "connections"), weights=(4, 3, 3))[0]
        try:
            if action == "sigkill":
                fleet.sigkill(rng)
            elif action == "sigterm":
                fleet.sigterm(rng)
            else:
                fleet.counts["connection_kills"] += 1
                fleet.counts["sessions_terminated"] += terminate_sessions(database)
        except Exception as exc:  # the killer must outlive its own failures; they are reported
            fleet.counts["killer_errors"] += 1
            timeline.append(f"{time.monotonic() - begin:7.1f}s killer error {exc!r}")
            continue
        timeline.append(f"{time.monotonic() - begin:7.1f}s {action}")


# -- the run -----------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    low, _, high = args.every.partition("-")
    every = (float(low), float(high or low))
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    database = f"uj_soak_{os.getpid()}"
    log_dir = Path(args.logs or f"/tmp/uj-soak-{stamp}")
    log_dir.mkdir(parents=True, exist_ok=True)

    env = {**os.environ, "DJANGO_SETTINGS_MODULE": os.environ.get("SOAK_SETTINGS", "tests.settings"),
           "JOBS_TEST_DB": "postgres", "JOBS_TEST_DB_NAME": database, "JOBS_TEST_VISIBILITY": args.visibility,
           "PYTHONPATH": str(ROOT)}
    os.environ.update({k: env[k] for k in ("DJANGO_SETTINGS_MODULE", "JOBS_TEST_DB", "JOBS_TEST_DB_NAME",
                                           "JOBS_TEST_VISIBILITY")})
    sys.path.insert(0, str(ROOT))

    print(f"soak: database {database}, {args.workers} workers x {args.concurrency}, {args.jobs} jobs, killer "
          f"every {args.every}s for up to {args.minutes:g} min, seed {seed}, logs {log_dir}", flush=True)
    admin(f'CREATE DATABASE "{database}"')
    fleet = Fleet(env=env, log_dir=log_dir, concurrency=args.concurrency, drain_timeout=args.drain_timeout)
    try:
        subprocess.run([sys.executable, "-m", "django", "migrate", "-v", "0", "--settings",
                        env["DJANGO_SETTINGS_MODULE"]], cwd=ROOT, env=env, check=True)
        import django

        django.setup()
        return run(args, fleet, database, rng, every, seed, log_dir)
    finally:
        fleet.kill_all()
        from django.db import connections

        connections.close_all()
        if args.keep_db:
            print(f"soak: kept database {database}")
        else:
            admin(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def run(args: argparse.Namespace, fleet: Fleet, database: str, rng: random.Random, every: tuple[float, float],
        seed: int, log_dir: Path) -> int:
    from django.db import OperationalError, connection
    from django.db.models import Count, Max, Sum

    from tests.app.jobs import soak_steps
    from tests.app.models import Effect
    from ultimate_jobs.models import Job, JobStep

    def query(fn):  # noqa: ANN001, ANN202 (the script's own connection may be cut by the killer: re-dial)
        for _ in range(50):
            try:
                return fn()
            except OperationalError:
                connection.close()
                time.sleep(0.2)
        return fn()

    for _ in range(args.workers):
        fleet.start(restart=False)
    begin = time.monotonic()
    pause = args.pause_ms / 1000
    ids: list[object] = []
    feed_seconds = 0.0 if args.all_at_once else args.minutes * 60 * 0.8

    fed_at = [begin]

    def feed(upto: int) -> None:
        while len(ids) < upto:
            keys = range(len(ids), min(len(ids) + 1000, upto))
            batch = [{"key": f"j{n:06d}", "pause": pause} for n in keys]
            # A killed session may take the answer with it: the keys dedupe, so sending again is safe.
            ids.extend(r.id for r in query(lambda batch=batch: soak_steps.enqueue_many(batch)))
        fed_at[0] = time.monotonic()

    if not feed_seconds:
        feed(args.jobs)
    stop = threading.Event()
    timeline: list[str] = []
    thread = threading.Thread(target=killer, args=(fleet, database, rng, every, stop, timeline), daemon=True)
    thread.start()
    chaos_until = begin + args.minutes * 60
    last_print = 0.0
    live = args.jobs
    backlog = 0  # the most jobs ever live at once: whether the fleet kept up with the feed
    while True:
        now = time.monotonic()
        if len(ids) < args.jobs:
            share = 1.0 if not feed_seconds else min(1.0, (now - begin) / feed_seconds)
            feed(max(len(ids), int(args.jobs * share)))
        fleet.reap()
        live = query(lambda: Job.objects.filter(name="tests.soak.steps").exclude(state__in=TERMINAL).count())
        backlog = max(backlog, live)
        if now - last_print >= 10:
            last_print = now
            print(f"soak: {now - begin:6.0f}s  enqueued={len(ids):6d}  live={live:6d}  {dict(fleet.counts)}",
                  flush=True)
        if (live == 0 and len(ids) == args.jobs) or now >= chaos_until:
            break
        time.sleep(1.0)
    if len(ids) < args.jobs:
        feed(args.jobs)
    enqueued = fed_at[0]
    stop.set()
    thread.join(30)
    chaos_seconds = time.monotonic() - begin
    grace_until = time.monotonic() + args.grace
    while live and time.monotonic() < grace_until:
        fleet.reap()
        time.sleep(1.0)
        live = query(lambda: Job.objects.filter(name="tests.soak.steps").exclude(state__in=TERMINAL).count())
    finished = time.monotonic()
    fleet.stop()

    # -- the ledger ----------------------------------------------------------------------------------------
    connection.close()
    jobs = Job.objects.filter(name="tests.soak.steps")
    states = Counter(jobs.values_list("state", flat=True))
    stored_ids = set(jobs.values_list("id", flat=True))
    run_ids = dict(jobs.values_list("run_id", "state"))
    steps = JobStep.objects.filter(run_id__in=list(run_ids))
    step_rows = Counter(steps.filter(status="completed").values_list("name", flat=True))
    step_executions = dict(steps.values_list("name").annotate(n=Sum("executions")))
    effects: dict[str, Counter[int]] = {s: Counter() for s in STEPS}
    for key, n in Effect.objects.values_list("key").annotate(n=Count("id")):
        step = key.rpartition(":")[2]
        if step in effects:
            effects[step][n] += 1
    done_ids = set(jobs.filter(state="done").values_list("id", flat=True))
    completed_per_run = Counter(steps.filter(status="completed").values_list("run_id", flat=True))
    done_missing_steps = sum(1 for run_id, state in run_ids.items()
                             if state == "done" and completed_per_run[run_id] != len(STEPS))
    attempts = jobs.aggregate(m=Max("attempt"))["m"] or 0
    retried = jobs.filter(attempt__gt=1).count()
    log_events: Counter[str] = Counter()
    for path in sorted(log_dir.glob("worker-*.log")):
        text = path.read_text(errors="replace")
        for event in LOG_EVENTS:
            log_events[event] += len(re.findall(re.escape(event) + r"\b", text))

    duplicates = {s: sum((n - 1) * count for n, count in effects[s].items()) for s in STEPS}
    violations: list[str] = []
    if len(ids) != args.jobs or stored_ids != set(ids):
        violations.append(f"lost jobs: {len(set(ids) - stored_ids)} enqueued ids have no row")
    if states.get("done", 0) != args.jobs:
        violations.append(f"not every job done: {dict(states)}")
    if done_missing_steps:
        violations.append(f"{done_missing_steps} done jobs lack a completed step")
    for step in STEPS:
        have = sum(effects[step].values())
        if have < len(done_ids):
            violations.append(f"step {step}: {len(done_ids) - have} done jobs have no effect")
        if step_rows.get(step, 0) != len(done_ids):
            violations.append(f"step {step}: {step_rows.get(step, 0)} completed rows for {len(done_ids)} "
                              "done jobs")
    for step in ATOMIC:
        if duplicates[step]:
            violations.append(f"atomic step {step} completed twice: {duplicates[step]} extra effects")
    bad_exits = {code: n for code, n in (fleet.drain_exits + fleet.stop_exits).items() if code != 0}
    if bad_exits:
        violations.append(f"SIGTERMed workers exited non-zero: {bad_exits}")
    if fleet.counts["unexpected_exits"]:
        violations.append(f"{fleet.counts['unexpected_exits']} workers exited on their own")

    elapsed = finished - begin
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        server_version = cursor.fetchone()[0].split()[0]
    rows = [
        ("date (UTC)", datetime.now(UTC).strftime("%Y-%m-%d %H:%M")),
        ("machine", f"{platform.node()} {os.cpu_count()} cores, Python {platform.python_version()}, "
                    f"PostgreSQL {server_version}"),
        ("command", "scripts/soak.py " + " ".join(sys.argv[1:]) + f" (seed {seed})"),
        ("workers x slots", f"{args.workers} x {args.concurrency}, visibility {args.visibility}, "
                            f"drain {args.drain_timeout}"),
        ("jobs (3 steps each)", f"{args.jobs}"),
        ("enqueued over", f"{enqueued - begin:.1f}s" + (" (all at once)" if not feed_seconds else " (fed)")),
        ("chaos", f"{chaos_seconds:.1f}s (killer every {args.every}s)"),
        ("all terminal after", f"{elapsed:.1f}s" + ("" if not live else f" ({live} still live)")),
        ("jobs/s", f"{args.jobs / elapsed:.1f}" + (f" (fed at {args.jobs / feed_seconds:.0f}/s)"
                                                    if feed_seconds else "")),
        ("max live backlog", str(backlog)),
        ("states", ", ".join(f"{k}={v}" for k, v in sorted(states.items()))),
        ("SIGKILLs", str(fleet.counts["sigkill"])),
        ("SIGTERMs (exit codes)", f"{fleet.counts['sigterm']} ({dict(fleet.drain_exits)})"),
        ("final stop (exit codes)", str(dict(fleet.stop_exits))),
        ("connection kills (sessions)",
         f"{fleet.counts['connection_kills']} ({fleet.counts['sessions_terminated']} sessions)"),
        ("worker restarts", str(fleet.counts["restarts"])),
        ("unexpected worker exits", str(fleet.counts["unexpected_exits"])),
        ("max attempt", str(attempts)),
        ("jobs with attempt > 1", str(retried)),
        ("step executions (sum)", ", ".join(f"{s}={step_executions.get(s, 0)}" for s in STEPS)),
        ("duplicate executions", ", ".join(f"{s}={duplicates[s]}" for s in STEPS)
         + " (charge is not atomic: at-least-once)"),
        ("worker log events", ", ".join(f"{k}={v}" for k, v in sorted(log_events.items()) if v)),
        ("violations", str(len(violations))),
    ]
    width = max(len(k) for k, _ in rows)
    print("\n" + "\n".join(f"| {k.ljust(width)} | {v} |" for k, v in rows))
    for line in violations:
        print(f"VIOLATION: {line}")
    (log_dir / "timeline.txt").write_text("\n".join(timeline) + "\n")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
