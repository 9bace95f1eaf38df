"""The scheduler: fire each task's occurrences once, from whichever process holds the lease.

Usage::

    python manage.py jobs_scheduler            # or jobs_worker, whose scheduler role is on by default
    python manage.py jobs_scheduler --burst    # one dispatch round, then exit
    # embedded and in tests:
    from ultimate_jobs.schedule.scheduler import Scheduler
    Scheduler().run_once()                     # one round -> Round(leading, now, fired, next_due, wait)

Options (default): ``tasks`` (every registered task), ``database`` (the ``DATABASE`` setting),
``lease`` (30s: the leader lease, renewed every third of it), ``burst`` (False: one round),
``drain_timeout`` (``DRAIN_TIMEOUT``: how long SIGTERM waits for the round in flight),
``holder`` ("<host>:<pid>:<random>"), ``lease_name`` ("scheduler": one lease per fleet),
``on_round`` (None: ``callable(scheduler, round)`` after each round, for tests). A test that needs
a scheduler to lead whatever the lease says uses ``ultimate_jobs.testing.force_leader``.

A round renews (or takes) the lease, then, for each due task, asks for the lease again and
writes the occurrence's jobs and the new watermark in one transaction, the watermark moved by
compare-and-set. The first round of a new leader reads the task states (arming new tasks at
"now" without firing); after that, watermarks live in memory and an idle round sends only the
lease renewal. Every "now" is the database's. One round runs at a time: a second ``run_once()``
joins the one in flight. SIGTERM lets the round finish, then hands the lease back; a round
abandoned by a second signal or the drain timeout does not (the lease lapses on its own).

Logged events: ``jobs.scheduler.started``, ``jobs.scheduler.stopped``, ``jobs.scheduler.fired``,
``jobs.scheduler.caught-up``, ``jobs.scheduler.fire-lost``, ``jobs.scheduler.fire-failed``,
``jobs.scheduler.round-failed``, ``jobs.scheduler.drain-abandoned``, and those of
``ultimate_jobs.schedule.leader`` and ``ultimate_jobs.schedule.watermarks``.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import DatabaseError, transaction

from ultimate_jobs import faults
from ultimate_jobs.conf import get_settings
from ultimate_jobs.db import LeaderLease, close_connection, store_for
from ultimate_jobs.durations import to_seconds
from ultimate_jobs.enqueue import submit
from ultimate_jobs.errors import X_INVARIANT, JobsError
from ultimate_jobs.schedule import watermarks
from ultimate_jobs.schedule.declarations import TaskHandle, registered_tasks, task
from ultimate_jobs.schedule.leader import Leadership
from ultimate_jobs.schedule.watermarks import TaskState
from ultimate_jobs.service_loop import LoopedService, ServiceLoop

__all__ = ["Fire", "Round", "Scheduler", "registered_tasks", "task"]

log = logging.getLogger("ultimate_jobs")

LEASE_NAME = "scheduler"
MIN_WAIT = 0.01
MAX_FAILURE_BACKOFF = 300.0


@dataclass(frozen=True, slots=True)
class Fire:
    """One occurrence fired: its task, its instant and the jobs it enqueued (ids as strings)."""

    task: str
    occurrence: datetime
    jobs: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Round:
    """What one round did; ``wait`` is how long the loop sleeps before the next."""

    leading: bool
    now: datetime
    fired: tuple[Fire, ...]
    next_due: datetime | None
    wait: float


class Scheduler(LoopedService):
    """The scheduler role; see the module docstring."""

    def __init__(self, *, tasks: Sequence[TaskHandle] | None = None, database: str | None = None,
                 lease: Any = 30.0, burst: bool = False, drain_timeout: Any = None, holder: str | None = None,
                 lease_name: str = LEASE_NAME, on_round: Callable[[Scheduler, Round], None] | None = None) -> None:
        conf = get_settings()
        self.tasks = sorted(registered_tasks() if tasks is None else tasks, key=lambda t: t.name)
        self.alias = database or conf.DATABASE
        self.store = store_for(self.alias)
        self.lease = to_seconds(lease, subject="lease")
        self.renew_every = self.lease / 3
        self.drain_timeout = conf.DRAIN_TIMEOUT if drain_timeout is None else to_seconds(
            drain_timeout, subject="drain_timeout", positive=False)
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}:{os.urandom(3).hex()}"
        self.leadership = Leadership(self.store, name=lease_name, holder=self.holder, ttl=self.lease)
        self.on_round = on_round
        self.last_round: Round | None = None
        self.stats = {"rounds": 0, "fired": 0, "jobs": 0}
        self._states: dict[str, TaskState] | None = None  # held only while leading
        self._version = -1
        self._next: dict[str, tuple[datetime | None, datetime]] = {}  # task -> (watermark, next occurrence)
        self._failures: dict[str, tuple[int, float]] = {}  # task -> (failures in a row, monotonic retry time)
        self._round_lock = threading.Lock()
        self._round_owner: int | None = None
        self._loop = ServiceLoop(burst=burst, on_signal=self._on_signal,
                                 on_second_signal=lambda signum: self._abandon(f"second signal {signum}"))
        self._abandoned = False

    # -- one round ----------------------------------------------------------------------------

    def run_once(self) -> Round:
        """One dispatch round; a call made while another thread's round runs joins it and answers it."""
        if self._round_owner == threading.get_ident():
            raise JobsError(X_INVARIANT, "Scheduler.run_once() was called from inside its own round.")
        if not self._round_lock.acquire(blocking=False):
            with self._round_lock:  # one round at a time: wait the one in flight out and answer it
                if self.last_round is None:
                    raise JobsError(X_INVARIANT, "The round this call joined ended without an answer.")
                return self.last_round
        self._round_owner = threading.get_ident()
        try:
            report = self._round()
            self.last_round = report
            self.stats["rounds"] += 1
        finally:
            self._round_owner = None
            self._round_lock.release()
        if self.on_round is not None:
            self.on_round(self, report)
        return report

    def _round(self) -> Round:
        lease = self.leadership.elect()
        asked = time.monotonic()
        if not lease.leading:
            self._states = None
            wait = self.renew_every
            if lease.expires_at is not None:  # a standby wakes as the holder's lease ends
                wait = min(wait, max((lease.expires_at - lease.now).total_seconds(), 0.0) + 0.05)
            return Round(False, lease.now, (), None, max(wait, MIN_WAIT))
        states = self._load(lease)
        fired: list[Fire] = []
        for handle in self.tasks:
            state = states[handle.name]
            if state.paused or self._backing_off(handle.name):
                continue
            if self._next_occurrence(handle, state) > lease.now:
                continue
            again = self.leadership.still_leading()  # asked before every task, not only every round
            if again is None:
                self._states = None
                log.warning("jobs.scheduler.stopped-dispatching holder=%s task=%s: the lease is no longer "
                            "ours", self.holder, handle.name)
                return Round(False, lease.now, tuple(fired), None, MIN_WAIT)
            lease, asked = again, time.monotonic()
            fired.extend(self._dispatch(handle, state, lease.now))
        next_due = self._next_due(states)
        wait = self.renew_every
        if next_due is not None:
            wait = min(wait, (next_due - lease.now).total_seconds() - (time.monotonic() - asked))
        now_mono = time.monotonic()
        for _, retry_at in self._failures.values():
            if retry_at > now_mono:
                wait = min(wait, retry_at - now_mono)
        return Round(True, lease.now, tuple(fired), next_due, max(wait, MIN_WAIT))

    def _load(self, lease: LeaderLease) -> dict[str, TaskState]:
        """The task states: read once per leadership (and after pause/resume bumped the version)."""
        if self._states is None or lease.version != self._version:
            self._states = watermarks.load(self.alias, [t.name for t in self.tasks], arm_at=lease.now)
            self._version = lease.version
        return self._states

    def _next_occurrence(self, handle: TaskHandle, state: TaskState) -> datetime:
        cached = self._next.get(handle.name)
        if cached is None or cached[0] != state.watermark:
            assert state.watermark is not None  # load() arms every task it answers
            cached = (state.watermark, handle.schedule.next_after(state.watermark))
            self._next[handle.name] = cached
        return cached[1]

    def _next_due(self, states: dict[str, TaskState]) -> datetime | None:
        """The next occurrence of any task that may fire (a task backing off counts by its retry time)."""
        due = [self._next_occurrence(t, states[t.name]) for t in self.tasks
               if not states[t.name].paused and not self._backing_off(t.name)]
        return min(due) if due else None

    def _dispatch(self, handle: TaskHandle, state: TaskState, now: datetime) -> list[Fire]:
        """Fire what the catch-up policy picks from the due occurrences; move the watermark past them all."""
        assert state.watermark is not None
        due = handle.schedule.latest(after=state.watermark, until=now, limit=handle.max_catch_up)
        if not due:
            return []
        chosen = {"skip": due[-1:], "run-once": due[:1], "run-all": due}[handle.catch_up]
        try:  # input(occurrence) is the application's code: refuse the fire, not the round
            batches = [(at, handle.rows_for(at, database=self.alias)) for at in chosen]
        except Exception as exc:
            self._failed(handle.name, exc)
            return []
        results = []
        with transaction.atomic(using=self.alias):
            moved = watermarks.advance(self.alias, handle.name, expected=state.watermark, watermark=due[-1],
                                       occurrence=chosen[-1], fired=len(chosen), now=now)
            rows = [row for _, batch in batches for row in batch]
            if moved and rows:
                # Its own transaction, not a caller's; a routed queue's jobs are staged in it (the
                # relay delivers them), so an occurrence still fires once with its watermark.
                results = submit(rows, database=self.alias, direct=True, stage_routed=True)
        if not moved:
            fresh = watermarks.read(self.alias, [handle.name]).get(handle.name)
            if fresh is not None and fresh.watermark is not None:
                state.watermark, state.paused = fresh.watermark, fresh.paused
            else:  # the row went away: reload (and re-arm) next round
                self._states = None
            log.info("jobs.scheduler.fire-lost task=%s occurrence=%s: another scheduler fired it, or the "
                     "task was paused", handle.name, chosen[-1].isoformat())
            return []
        state.watermark = due[-1]
        self._failures.pop(handle.name, None)
        fires, offset = [], 0
        for occurrence, batch in batches:
            ids = tuple(str(r.id) for r in results[offset:offset + len(batch)])
            offset += len(batch)
            fires.append(Fire(handle.name, occurrence, ids))
            log.info("jobs.scheduler.fired task=%s occurrence=%s job=%s jobs=%s", handle.name,
                     occurrence.isoformat(), handle.job.name, ",".join(ids))
        if len(due) > 1:
            log.info("jobs.scheduler.caught-up task=%s catch_up=%s considered=%s fired=%s watermark=%s",
                     handle.name, handle.catch_up, len(due), len(chosen), due[-1].isoformat())
        self.stats["fired"] += len(fires)
        self.stats["jobs"] += len(results)
        faults.fault("scheduler_after_fire")
        return fires

    def _failed(self, name: str, exc: Exception) -> None:
        failures = self._failures.get(name, (0, 0.0))[0] + 1
        delay = min(2.0 ** failures, MAX_FAILURE_BACKOFF)
        self._failures[name] = (failures, time.monotonic() + delay)
        log.error("jobs.scheduler.fire-failed task=%s error=%r retry_in=%.0fs", name, exc, delay)

    def _backing_off(self, name: str) -> bool:
        failure = self._failures.get(name)
        return failure is not None and time.monotonic() < failure[1]

    # -- the loop -------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop after the round in flight (if any); ``run()`` then hands the lease back."""
        self._loop.stop()

    def _on_signal(self, signum: int) -> None:
        self.stop()
        if self._round_owner is not None:
            timer = threading.Timer(self.drain_timeout, self._abandon, args=("drain timeout",))
            timer.daemon = True
            timer.start()

    def _abandon(self, why: str) -> None:
        """Exit without handing the lease back: a round still enqueueing must not promote a standby."""
        if self._round_owner is not None:
            self._abandoned = True
            log.error("jobs.scheduler.drain-abandoned holder=%s why=%s: the lease is left to lapse",
                      self.holder, why)
            os._exit(1)
        if self._loop.signals > 1:
            os._exit(1)

    def _tick(self) -> float | None:
        return self._loop.idle(self.run_once().wait)

    def _round_failed(self, exc: Exception, delay: float) -> None:
        if not self._loop.classified(exc, role=f"scheduler {self.holder}", alias=self.alias):
            log.warning("jobs.scheduler.round-failed holder=%s error=%r retry_in=%.1fs", self.holder, exc, delay)
        self._states = None
        self.leadership.forget()
        close_connection(self.alias)
        if self.burst:
            self.stop()  # one round, failed or not

    def run(self, *, install_signals: bool = True) -> dict[str, int]:
        """Run rounds until stopped (or one, with ``burst``); answer the counts."""
        log.info("jobs.scheduler.started holder=%s tasks=%s lease=%.1fs", self.holder, len(self.tasks),
                 self.lease)
        try:
            self._loop.run(self._tick, errors=(DatabaseError,), on_error=self._round_failed,
                           install_signals=install_signals)
        finally:
            if not self._abandoned:
                self.leadership.resign()
            if threading.current_thread() is not threading.main_thread():
                close_connection(self.alias)  # a role thread's connection dies with the thread: close it
            log.info("jobs.scheduler.stopped holder=%s rounds=%s fired=%s jobs=%s", self.holder,
                     self.stats["rounds"], self.stats["fired"], self.stats["jobs"])
        return dict(self.stats)
