"""The worker: claim runnable jobs, run them, settle them, keep their leases.

Usage::

    python manage.py jobs_worker --queues emails,default --concurrency 10
    # or, in tests and embedded use:
    from ultimate_jobs import Worker
    Worker(queues=["default"], concurrency=4).run_once()     # one claim pass -> the runs it started

Options (default): ``queues`` (the ``QUEUES`` setting), ``concurrency`` (``CONCURRENCY``: one
number shared by the queues, or ``{"a": 4, "b": 2}``), ``max_in_flight`` (``MAX_IN_FLIGHT``),
``burst`` (False: exit once nothing is runnable and nothing is in flight), ``drain_timeout``
(``DRAIN_TIMEOUT``), ``database`` (``DATABASE``), ``on_idle`` (None: with ``burst``, a callable
asked before exiting; answering True means it made work runnable, e.g. the relay published
staged rows, and the worker passes again).

One loop thread claims (one statement per queue per pass, ``FOR UPDATE SKIP LOCKED`` on
PostgreSQL), settles finished attempts in one statement per pass, renews every held lease in
one statement per heartbeat interval and hands lapsed leases back. Sync bodies run on a pool
of daemon threads, ``async def`` bodies on one event-loop thread. No ORM object is built per
job on this path.

Logged events: ``jobs.worker.started``, ``jobs.worker.stopped``, ``jobs.worker.draining``,
``jobs.worker.drain-abandoned``, ``jobs.claim.failed``, ``jobs.settle.failed``,
``jobs.settle.lost``, ``jobs.heartbeat.failed``, ``jobs.lease.lost``, ``jobs.lease.rescued``,
``jobs.timeout``, ``jobs.timeout.abandoned``, ``jobs.attempt.failed``, ``jobs.dead_lettered``,
``jobs.worker.presence-failed`` (its ``WorkerHeartbeat`` row, written once per heartbeat
interval by ``presence.Presence``), ``jobs.worker.task-failed``.

A run's ``timeout`` and its current step's ``step_timeout`` (``ctx.step.run``) are both enforced
by the loop: the cancel token is set first, then the attempt is failed. Once a settle statement
answered that a row settled, the settlement's ``after`` (``on_settled``, an event wait's
re-check) runs on a small hook pool, never on the claim loop.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import queue as queue_module
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from django.db import DatabaseError, InterfaceError, OperationalError, connections

from ultimate_jobs import clock
from ultimate_jobs.conf import get_settings
from ultimate_jobs.context import CancelToken
from ultimate_jobs.db import ClaimedJob, Settlement, close_connection, store_for
from ultimate_jobs.db.listen import Listener
from ultimate_jobs.declaration import JobHandle, check_queue_name, get_job_handle, registered_jobs
from ultimate_jobs.durations import to_seconds
from ultimate_jobs.errors import X_CONFIG_INVALID, X_JOB_CLAIM_QUEUES_EMPTY, JobsError
from ultimate_jobs.faults import fault
from ultimate_jobs.runtime import deadlines
from ultimate_jobs.runtime import settled as settled_hooks
from ultimate_jobs.runtime.execute import run_attempt, run_attempt_async
from ultimate_jobs.runtime.limits import ProcessLimits
from ultimate_jobs.runtime.presence import Presence
from ultimate_jobs.runtime.slots import FleetSlots

log = logging.getLogger("ultimate_jobs")

_DB_ERRORS = (OperationalError, InterfaceError, DatabaseError)
RESCUE_INTERVAL = 1.0
SETTLE_LINGER = 0.002  # seconds a pass waits for more runs to finish before it settles
HOOK_THREADS = 2


def _run_and_close(task: Callable[[], object]) -> None:
    """A hook-pool task; the thread's connections are closed after it (these tasks are rare, and a
    connection idling in a hook thread would outlive the worker's own)."""
    try:
        task()
    finally:
        connections.close_all()


@dataclass(slots=True, eq=False)
class Run:
    """One attempt this worker holds: the claimed row, its cancel token and its clocks."""

    claimed: ClaimedJob
    handle: JobHandle
    token: CancelToken = field(default_factory=CancelToken)
    started: float = field(default_factory=time.monotonic)
    renewed: float = field(default_factory=time.monotonic)
    deadline: float | None = None
    settled: bool = False
    finished: threading.Event = field(default_factory=threading.Event)
    outcome: Settlement | None = None
    slot: tuple[str, int] | None = None

    @property
    def id(self) -> UUID:
        return self.claimed.id


def _count(values: Iterable[str | None]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        if value is not None:
            counts[value] = counts.get(value, 0) + 1
    return counts


class _Pool:
    """Daemon threads running sync bodies: a body that never returns cannot keep the process alive."""

    def __init__(self, size: int, prefix: str = "ultimate-jobs") -> None:
        self._tasks: queue_module.SimpleQueue[Callable[[], None] | None] = queue_module.SimpleQueue()
        self._threads = [threading.Thread(target=self._loop, name=f"{prefix}-{n}", daemon=True)
                         for n in range(size)]
        for thread in self._threads:
            thread.start()

    def _loop(self) -> None:
        try:
            while (task := self._tasks.get()) is not None:
                try:
                    task()
                except Exception:  # a task's failure is logged; the pool thread keeps serving
                    log.exception("jobs.worker.task-failed")
        finally:
            # The thread ends with the pool: close its connections now rather than whenever the
            # garbage collector gets to them (an in-process Worker must not leave sessions behind).
            connections.close_all()

    def submit(self, task: Callable[[], None]) -> None:
        self._tasks.put(task)

    def shutdown(self, wait: float = 0.0) -> None:
        for _ in self._threads:
            self._tasks.put(None)
        deadline = time.monotonic() + wait
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))


class _Loop:
    """One event-loop thread for ``async def`` bodies, started on first use."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="ultimate-jobs-async", daemon=True)
        self._thread.start()

    def submit(self, coro: Any) -> None:
        asyncio.run_coroutine_threadsafe(coro, self.loop)

    def shutdown(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)


def parse_concurrency(value: int | Mapping[str, int] | str | None, queues: Sequence[str]) -> dict[str, int] | int:
    """``10`` (shared by the queues) or ``{"a": 4, "b": 2}`` / ``"a=4,b=2"`` (per queue)."""
    if value is None:
        value = get_settings().CONCURRENCY
    if isinstance(value, str):
        if "=" not in value:
            value = int(value)
        else:
            pairs = [part.split("=", 1) for part in value.split(",") if part.strip()]
            value = {q.strip(): int(n) for q, n in pairs}
    if isinstance(value, Mapping):
        caps = {check_queue_name(q, code=X_CONFIG_INVALID): n for q, n in value.items()}
        if any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in caps.values()):
            raise JobsError(X_CONFIG_INVALID, f"concurrency {value!r} must give each queue a whole number >= 1.")
        missing = [q for q in queues if q not in caps]
        if missing:
            raise JobsError(X_CONFIG_INVALID, f"concurrency names no slots for queue(s) {', '.join(missing)}.",
                            "Give every --queues entry a count, as in a=4,b=2.")
        return caps
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise JobsError(X_CONFIG_INVALID, f"concurrency={value!r} must be a whole number >= 1.")
    return value


class Worker:
    """One worker process's claim loop; see the module docstring."""

    def __init__(self, *, queues: Sequence[str] | None = None, concurrency: Any = None,
                 max_in_flight: int | None = None, burst: bool = False, drain_timeout: Any = None,
                 database: str | None = None, worker_id: str | None = None,
                 on_pass: Callable[[Worker, list[Run]], None] | None = None,
                 on_idle: Callable[[], bool] | None = None) -> None:
        conf = get_settings()
        self.queues = list(queues) if queues is not None else list(conf.QUEUES)
        if not self.queues:
            raise JobsError(X_JOB_CLAIM_QUEUES_EMPTY, "The worker was given no queues to claim from.")
        for name in self.queues:
            check_queue_name(name, code=X_CONFIG_INVALID)
        self.concurrency = parse_concurrency(concurrency, self.queues)
        total = sum(self.concurrency.values()) if isinstance(self.concurrency, dict) else self.concurrency
        cap = max_in_flight if max_in_flight is not None else conf.MAX_IN_FLIGHT
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
            raise JobsError(X_CONFIG_INVALID, f"max_in_flight={cap!r} must be a whole number >= 1.")
        self.capacity = min(total, cap) if cap is not None else total
        self.burst = burst
        self.drain_timeout = conf.DRAIN_TIMEOUT if drain_timeout is None else to_seconds(
            drain_timeout, subject="drain_timeout", positive=False)
        self.alias = database or conf.DATABASE
        self.store = store_for(self.alias)
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{os.urandom(3).hex()}"
        self.visibility = conf.VISIBILITY_TIMEOUT
        self.heartbeat_interval = conf.HEARTBEAT_INTERVAL
        self.poll_interval = conf.POLL_INTERVAL
        self.idle_poll_max = max(conf.IDLE_POLL_MAX, conf.POLL_INTERVAL)
        self.on_pass = on_pass
        self._slots = FleetSlots(self.store, holder=self.worker_id, ttl=self.visibility,
                                 wait_delay=max(self.poll_interval, 0.25))
        self.on_idle = on_idle
        self.state = "idle"
        self.runs: dict[UUID, Run] = {}
        self._abandoned: set[Run] = set()  # timed out and settled, body still running on its thread
        self.stats = {"claimed": 0, "settled": 0, "interrupted": 0, "lost": 0, "shed": 0}
        self._limits = ProcessLimits(conf.LIMITS)
        self._done: queue_module.SimpleQueue[Run] = queue_module.SimpleQueue()
        self._pending: list[Run] = []
        self._wake = threading.Event()
        self._stopping = False
        self._drain_deadline: float | None = None
        self._signals = 0
        self._pool: _Pool | None = None
        self._hooks: _Pool | None = None  # what runs once a settle landed: on_settled, event re-checks
        self._loop: _Loop | None = None
        self._listener: Any = None
        self._last_heartbeat = time.monotonic()
        self._last_rescue = 0.0
        self._rotation = 0
        self._backoff = 0.0
        self._pass_failed = False
        self._last_claim_full = False
        self._stop_event = threading.Event()
        self._abandoned_runs = 0
        self._burst_hold = 0.0
        self._reconcile_due = False
        self._lost: list[tuple[UUID, str, str]] = []  # lost leases not yet counted
        self.presence = Presence(worker_id=self.worker_id, alias=self.alias, queues=self.queues,
                                 slots=self.capacity, visibility=self.visibility)

    # -- one pass ---------------------------------------------------------------------------

    def run_once(self) -> list[Run]:
        """One pass: settle what finished, renew leases, hand back lapsed ones, claim. Answer the runs started."""
        if self._reconcile_due:
            self._reconcile()
        self._collect()
        self._expire_timeouts()
        now = time.monotonic()
        if now - self._last_heartbeat >= self.heartbeat_interval:
            self._heartbeat()
        if now - self._last_rescue >= RESCUE_INTERVAL:
            self._rescue()
        started = self._settle_and_claim()
        if self.on_pass is not None:
            self.on_pass(self, started)
        return started

    @property
    def in_flight(self) -> int:
        return sum(1 for run in self.runs.values() if not run.finished.is_set()) + len(self._abandoned)

    def _free_capacity(self) -> int:
        return self.capacity - len(self.runs) - len(self._abandoned)

    def _names(self) -> list[str]:
        return [handle.name for handle in registered_jobs()]

    def _free_slots(self) -> dict[str, int]:
        """Free slots per queue for this pass, split so no queue starves."""
        held = self._held()  # runs settling in this pass's transaction have free slots already
        free = self.capacity - len(held) - len(self._abandoned)
        if free <= 0:
            return {}
        if isinstance(self.concurrency, dict):
            busy: dict[str, int] = {}
            for run in held:
                busy[run.claimed.queue] = busy.get(run.claimed.queue, 0) + 1
            slots = {q: max(0, self.concurrency[q] - busy.get(q, 0)) for q in self.queues}
        else:
            share, extra = divmod(free, len(self.queues))
            order = self.queues[self._rotation:] + self.queues[:self._rotation]
            self._rotation = (self._rotation + 1) % len(self.queues)
            slots = {q: share + (1 if i < extra else 0) for i, q in enumerate(order)}
        # max_in_flight bounds the sum; trim from the end of this pass's rotation.
        total = sum(slots.values())
        for q in reversed(list(slots)):
            if total <= free:
                break
            cut = min(slots[q], total - free)
            slots[q] -= cut
            total -= cut
        return {q: n for q, n in slots.items() if n > 0}

    def _settle_and_claim(self) -> list[Run]:
        """Settle what finished and claim into the free slots, in one transaction (one commit)."""
        names = self._names()
        claims = {} if self._stopping or not names else self._free_slots()
        blocked: list[str] = []
        if claims and self._limits.active:
            held = self._held()
            claims = self._limits.cap_slots(claims, _count(r.claimed.queue for r in held), len(held))
            blocked = self._limits.blocked_tenants(_count(r.claimed.tenant_id for r in held if r.claimed.tenant_id))
        if not claims and not self._pending:
            return []
        batch = self._pending
        try:
            if batch:
                fault("before_ack")
            settled, claimed = self.store.job_settle_and_claim(
                settlements=[r.outcome for r in batch if r.outcome is not None], claims=claims, names=names,
                worker_id=self.worker_id, visibility=self.visibility, now=clock.sql_now(),
                blocked_tenants=blocked)
        except _DB_ERRORS as exc:
            self._db_failed("jobs.claim.failed", exc)
            # The claim may have committed with its answer lost: reconcile before the next claim.
            self._reconcile_due = bool(claims)
            return []  # the settlements stay pending: the fenced statement is safe to send again
        self._pending = []
        self._record_settled(batch, settled)
        self._last_claim_full = any(len(claimed.get(q, ())) == n for q, n in claims.items())
        if any(claimed.values()):
            fault("after_claim")
        started = []
        # Per-tenant counts are taken once per pass and kept current as runs start.
        by_tenant = _count(r.claimed.tenant_id for r in self._held()) if self._limits.active else {}
        for row in (row for rows in claimed.values() for row in rows):
            if self._limits.active and not self._limits.admit(row.tenant_id, by_tenant):
                self._shed(row)
                continue
            started.append(self._start(row))
            if row.tenant_id is not None:
                by_tenant[row.tenant_id] = by_tenant.get(row.tenant_id, 0) + 1
        self.stats["claimed"] += len(started)
        return started

    def _held(self) -> list[Run]:
        settling = set(map(id, self._pending))
        return [run for run in self.runs.values() if id(run) not in settling]

    def _shed(self, claimed: ClaimedJob) -> None:
        """Hand a claim the per-process limits refuse straight back: ``ready``, uncounted, no error."""
        log.info("jobs.worker.shed job_id=%s name=%s queue=%s tenant=%s", claimed.id, claimed.name, claimed.queue,
                 claimed.tenant_id)
        run = Run(claimed=claimed, handle=get_job_handle(claimed.name))  # type: ignore[arg-type]
        run.outcome = Settlement(claimed.id, claimed.claim, "ready", uncount=True)
        run.finished.set()
        self._pending.append(run)
        self.stats["shed"] += 1

    def _start(self, claimed: ClaimedJob) -> Run:
        handle = get_job_handle(claimed.name)
        assert handle is not None  # the claim asked only for registered names
        run = Run(claimed=claimed, handle=handle)
        if handle.timeout is not None:
            run.deadline = run.started + handle.timeout
        self.runs[claimed.id] = run
        if handle.is_async:
            if self._loop is None:
                self._loop = _Loop()
            self._loop.submit(self._execute_async(run))
        else:
            if self._pool is None:
                self._pool = _Pool(self.capacity)
            self._pool.submit(lambda: self._execute(run))
        return run

    def _execute(self, run: Run) -> None:
        try:
            busy = self._slots.acquire(run)
            if busy is not None:
                run.outcome = settled_hooks.attach(run.handle, run.claimed, busy)  # a refusal reaches on_settled
                return
            try:
                run.outcome = run_attempt(run.handle, run.claimed, run.token, alias=self.alias)
            finally:
                self._slots.release(run)
        finally:
            self._finish(run)

    async def _execute_async(self, run: Run) -> None:
        try:
            busy = await asyncio.to_thread(self._slots.acquire, run) if run.handle.concurrency else None
            if busy is not None:
                run.outcome = settled_hooks.attach(run.handle, run.claimed, busy)
                return
            try:
                run.outcome = await run_attempt_async(run.handle, run.claimed, run.token, alias=self.alias)
            finally:
                if run.slot is not None:
                    await asyncio.to_thread(self._slots.release, run)
        finally:
            self._finish(run)

    def _finish(self, run: Run) -> None:
        self._done.put(run)  # queued before it reads as finished: whoever waits on it finds it collected
        run.finished.set()
        self._wake.set()

    # -- settle -------------------------------------------------------------------------------

    def _collect(self) -> None:
        while True:
            try:
                run = self._done.get_nowait()
            except queue_module.Empty:
                return
            if run in self._abandoned:  # failed by its timeout already; the thread has now returned
                self._abandoned.discard(run)
                continue
            if run.outcome is None:
                self.stats["lost"] += 1
                self._forget(run)
                continue
            self._pending.append(run)

    def _forget(self, run: Run) -> None:
        if self.runs.get(run.id) is run:  # a later attempt of the same job may hold the key now
            del self.runs[run.id]

    def _settle(self) -> None:
        """Settle what finished without claiming (the drain's last passes)."""
        if not self._pending:
            return
        batch = self._pending
        try:
            settled, _ = self.store.job_settle_and_claim(
                settlements=[r.outcome for r in batch if r.outcome is not None], claims={}, names=[],
                worker_id=self.worker_id, visibility=self.visibility, now=clock.sql_now())
        except _DB_ERRORS as exc:
            self._db_failed("jobs.settle.failed", exc)
            return  # kept pending: the fenced statement is safe to send again
        self._pending = []
        self._record_settled(batch, settled)

    def _record_settled(self, batch: list[Run], settled: set[UUID]) -> None:
        for run in batch:
            run.settled = True
            self._forget(run)
            assert run.outcome is not None
            if run.id not in settled:
                self.stats["lost"] += 1
                log.warning("jobs.settle.lost job_id=%s name=%s queue=%s outcome=%s: the row is no longer this "
                            "worker's (cancelled or reclaimed)", run.id, run.claimed.name, run.claimed.queue,
                            run.outcome.state)
            else:
                # A suspension settled (state suspended, attempt handed back): counted as settled.
                if run.outcome.uncount and run.outcome.state != "suspended":
                    self.stats["interrupted"] += 1
                    if run.outcome.delay:  # handed back for later (a busy key): --burst waits it out
                        self._burst_hold = max(self._burst_hold, time.monotonic() + run.outcome.delay)
                else:
                    self.stats["settled"] += 1
                self._after(run.outcome.after)

    def _after(self, task: Callable[[], object] | None) -> None:
        """Run what waits for a settle to have landed (``on_settled``, an event wait's re-check),
        off the claim loop: a slow hook never delays a pass."""
        if task is None:
            return
        if self._hooks is None:
            self._hooks = _Pool(HOOK_THREADS, prefix="ultimate-jobs-hook")
        self._hooks.submit(functools.partial(_run_and_close, task))

    def _expire_timeouts(self) -> None:
        now = time.monotonic()
        for run in [r for r in self.runs.values() if not r.finished.is_set() and not r.settled]:
            expired = deadlines.expired(run.claimed, run.handle, run.token, run.deadline, now)
            if not expired:
                continue
            log.warning("jobs.timeout job_id=%s name=%s queue=%s", run.id, run.claimed.name, run.claimed.queue)
            outcome = deadlines.timed_out_outcome(run.handle, run.claimed, run.token, self.store)
            try:
                landed = self.store.job_settle_many(settlements=[outcome] if outcome else [], now=clock.sql_now())
            except _DB_ERRORS as exc:
                self._db_failed("jobs.settle.failed", exc)
                continue
            run.settled = True
            self.stats["settled"] += 1
            self._forget(run)
            self._abandoned.add(run)
            if outcome is not None and outcome.id in landed:
                self._after(outcome.after)

    # -- leases -------------------------------------------------------------------------------

    def _heartbeat(self) -> None:
        held = [r for r in self.runs.values() if not r.settled]
        self._last_heartbeat = time.monotonic()
        if not held:
            overrunning = [r for r in self._abandoned if r.slot is not None]
            if overrunning:  # a timed-out body still running keeps its fleet slot until it returns
                try:
                    self._slots.renew(overrunning)
                except _DB_ERRORS as exc:
                    log.warning("jobs.heartbeat.failed worker=%s slots error=%r", self.worker_id, exc)
            self.presence.beat([])
            return
        before = time.monotonic()
        try:
            renewed = self.store.job_heartbeat(held=[(r.id, r.claimed.claim) for r in held],
                                               worker_id=self.worker_id, visibility=self.visibility,
                                               now=clock.sql_now())
        except _DB_ERRORS as exc:
            log.warning("jobs.heartbeat.failed worker=%s held=%s error=%r", self.worker_id, len(held), exc)
            close_connection(self.alias)
            after = time.monotonic()
            for run in held:
                # Asked on both sides of the call: a whole window with no landed renewal is a lost lease.
                if before - run.renewed >= self.visibility or after - run.renewed >= self.visibility:
                    if run.token.set("X_JOB_LEASE_LOST", "No lease renewal landed for a whole visibility window."):
                        log.error("jobs.lease.lost job_id=%s name=%s queue=%s", run.id, run.claimed.name,
                                  run.claimed.queue)
                        self._lost.append((run.id, run.claimed.name, run.claimed.queue))
            return
        try:
            # A timed-out body that runs on keeps its slot until it returns (its row is settled).
            self._slots.renew(held + [r for r in self._abandoned if r.slot is not None])
        except _DB_ERRORS as exc:
            log.warning("jobs.heartbeat.failed worker=%s slots error=%r", self.worker_id, exc)
        for run in held:
            if run.id in renewed:
                run.renewed = before
            elif not run.finished.is_set() and run.token.set(
                    "X_JOB_LEASE_LOST", "The job was cancelled or reclaimed by another worker."):
                log.error("jobs.lease.lost job_id=%s name=%s queue=%s", run.id, run.claimed.name, run.claimed.queue)
                self._lost.append((run.id, run.claimed.name, run.claimed.queue))
        # Counted once the database answers again (a lost lease is often a lost connection).
        lost, self._lost = self._lost, []
        if not self.presence.lease_lost(lost):
            self._lost = lost[-1000:]  # kept (bounded) for the next heartbeat
        self.presence.beat([r.id for r in held])  # after the renewal: the leases come first

    def _reconcile(self) -> None:
        """Hand back rows claimed under this worker's id that it does not hold: a claim whose commit
        landed but whose answer was lost (a dropped connection). Uncounted: those bodies never ran."""
        held = [r.id for r in self.runs.values()] + [r.id for r in self._abandoned]
        try:
            returned = self.store.job_release_unheld(worker_id=self.worker_id, held=held, now=clock.sql_now())
        except _DB_ERRORS as exc:
            self._db_failed("jobs.reconcile.failed", exc)
            return
        self._reconcile_due = False
        if returned:
            log.warning("jobs.claim.reconciled worker=%s returned=%s: a claim's answer was lost; its rows are "
                        "back to ready, uncounted", self.worker_id, len(returned))

    def _rescue(self) -> None:
        self._last_rescue = time.monotonic()
        handles = registered_jobs()
        no_dead_letter = [h.name for h in handles if not h.retry.dead_letter]
        try:
            rescued = self.store.job_rescue(now=clock.sql_now(), names=[h.name for h in handles],
                                            no_dead_letter=no_dead_letter)
        except _DB_ERRORS as exc:
            self._db_failed("jobs.rescue.failed", exc)
            return
        for job_id, name, queue, state in rescued:
            log.warning("jobs.lease.rescued job_id=%s name=%s queue=%s now=%s", job_id, name, queue, state)
            handle = get_job_handle(name)
            if handle is not None and handle.on_settled is not None and state in ("dead", "failed"):
                self._after(functools.partial(settled_hooks.deliver_rescued, handle, job_id, self.alias))

    # -- failures --------------------------------------------------------------------------------

    def _linger(self) -> None:
        """Some runs finished: wait up to ``SETTLE_LINGER`` for the rest, so one commit settles many.

        Short bodies finish within microseconds of each other; settling each as it lands would
        spend a commit (an fsync) per job. Long bodies end the wait at once (nothing else is close).
        """
        deadline = time.monotonic() + SETTLE_LINGER
        while not self._stopping:
            unfinished = sum(1 for run in self.runs.values() if not run.finished.is_set())
            remaining = deadline - time.monotonic()
            if not unfinished or remaining <= 0:
                return
            self._wake.clear()
            if not self._wake.wait(remaining):
                return

    def _abandon(self) -> None:
        """The drain deadline passed: settle what finished, leave the rest to their leases."""
        self._collect()
        self._settle()
        abandoned = [str(r.id) for r in self.runs.values() if not r.finished.is_set()]
        self._abandoned_runs = len(abandoned) + len(self._abandoned)
        if abandoned:
            log.error("jobs.worker.drain-abandoned worker=%s abandoned=%s", self.worker_id, ",".join(abandoned))

    def _db_failed(self, event: str, exc: BaseException) -> None:
        self._pass_failed = True
        self._backoff = min(max(self._backoff * 2, 0.05), 5.0)
        log.warning("%s worker=%s error=%r retry_in=%.2fs", event, self.worker_id, exc, self._backoff)
        close_connection(self.alias)


    # -- the loop ----------------------------------------------------------------------------------

    def stop(self, reason: str = "X_DRAINING") -> None:
        """Stop claiming at once and cancel every held run with ``reason``; the loop then drains."""
        if not self._stopping:
            self._stopping = True
            self._drain_deadline = time.monotonic() + self.drain_timeout
            log.info("jobs.worker.draining worker=%s in_flight=%s timeout=%.1fs", self.worker_id, self.in_flight,
                     self.drain_timeout)
        for run in list(self.runs.values()):
            run.token.set(reason)
        self._stop_event.set()
        self._wake.set()

    def _on_signal(self, signum: int, frame: Any) -> None:
        self._signals += 1
        if self._signals > 1:
            log.warning("jobs.worker.killed worker=%s signal=%s: second signal, exiting at once", self.worker_id,
                        signum)
            os._exit(1)
        self.stop("X_DRAINING")

    def close(self, wait: float = 1.0) -> None:
        """Stop the listener and the body threads (idle ones exit at once; busy ones are abandoned)."""
        if self._listener is not None:
            self._listener.stop()
            self._listener = None
        if self._pool is not None:
            self._pool.shutdown(wait)
            self._pool = None
        if self._hooks is not None:
            self._hooks.shutdown(wait)
            self._hooks = None
        if self._loop is not None:
            self._loop.shutdown()
            self._loop = None

    def wake(self, queue: str = "") -> None:
        if not queue or queue in self.queues:
            self._wake.set()

    def run(self, *, install_signals: bool = True) -> dict[str, int]:
        """Run until stopped (or, with ``burst``, until nothing is runnable); answer the run counts."""
        if install_signals and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._on_signal)
            signal.signal(signal.SIGINT, self._on_signal)
        self.state = "running"
        self.presence.beat([])
        log.info("jobs.worker.started worker=%s queues=%s capacity=%s", self.worker_id, ",".join(self.queues),
                 self.capacity)
        if self.store.supports_listen_notify:
            self._listener = Listener(self.alias, self.queues, self.wake)
            self._listener.start()
        idle_wait = self.poll_interval
        try:
            while True:
                self._wake.clear()
                self._pass_failed = False
                started = self.run_once()
                if self._stopping:
                    if not self.runs and not self._pending:
                        break
                    if self._drain_deadline is not None and time.monotonic() >= self._drain_deadline:
                        self._abandon()
                        break
                if self._pass_failed:
                    if self._stopping:  # the stop event is set already: sleep out the backoff
                        time.sleep(min(self._backoff, max(0.0, (self._drain_deadline or 0) - time.monotonic())))
                    else:
                        self._stop_event.wait(self._backoff)
                    continue
                self._backoff = 0.0
                if (self.burst and not started and not self.runs and not self._pending and not self._abandoned
                        and time.monotonic() >= self._burst_hold):
                    if self.on_idle is None or not self.on_idle():
                        break
                    continue
                if not self._done.empty():
                    idle_wait = self.poll_interval
                    self._linger()
                    continue
                if started and self._last_claim_full and self._free_capacity() > 0:
                    idle_wait = self.poll_interval
                    continue  # more may be runnable now: no wait
                if started or self.runs:
                    idle_wait = self.poll_interval
                else:
                    idle_wait = min(idle_wait * 2, self.idle_poll_max)
                timeout = min(idle_wait, self.heartbeat_interval)
                if self._stopping and self._drain_deadline is not None:
                    timeout = max(0.0, min(timeout, self._drain_deadline - time.monotonic()))
                self._wake.wait(timeout)
        finally:
            # Bodies abandoned at the drain deadline must not delay the exit: join nobody then.
            self.close(wait=0.0 if self._abandoned_runs else 1.0)
            self.presence.leave()
            self.state = "stopped"
            log.info("jobs.worker.stopped worker=%s claimed=%s settled=%s interrupted=%s lost=%s", self.worker_id,
                     self.stats["claimed"], self.stats["settled"], self.stats["interrupted"], self.stats["lost"])
        return dict(self.stats)
