"""The worker: claim runnable jobs, run them, settle them, keep their leases.

Usage::

    python manage.py jobs_worker --queues emails,default --concurrency 10
    # or, in tests and embedded use:
    from ultimate_jobs import Worker
    Worker(queues=["default"], concurrency=4).run_once()     # one claim pass -> the runs it started

Options (default): ``queues`` (the ``QUEUES`` setting), ``concurrency`` (``CONCURRENCY``: one number
shared by the queues, or ``{"a": 4, "b": 2}``), ``max_in_flight`` (``MAX_IN_FLIGHT``), ``burst``
(False: exit once nothing is runnable and nothing is in flight), ``drain_timeout``
(``DRAIN_TIMEOUT``), ``database`` (the alias ``QUEUE_DATABASES`` routes the queues to, else
``DATABASE``; queues on several aliases need one ``Worker`` each, as ``jobs_worker`` runs them),
``on_idle`` (None: with ``burst``, a callable asked before exiting; answering True means it made
work runnable, e.g. the relay published staged rows, and the worker passes again).

One loop thread claims (one statement per queue per pass, ``FOR UPDATE SKIP LOCKED`` on
PostgreSQL), settles finished attempts in one statement per pass, renews every held lease in
one statement per heartbeat interval and hands lapsed leases back. Sync bodies run on a pool
of daemon threads, ``async def`` bodies on one event-loop thread. No ORM object is built per
job on this path.

``Worker`` puts its parts together: ``claims.Claims`` (free slots, the settle-and-claim statement,
starting runs), ``settling.Settler`` (settle batching, timeouts, the hooks), ``heartbeat.Heartbeat``
(heartbeat, lost and lapsed leases), ``drain.Drain`` (SIGTERM until exit), over the runs it holds
(``holdings.Holdings``), looped by ``ultimate_jobs.service_loop.ServiceLoop``. ``with Worker(...) as
worker:`` starts nothing; on exit it drains what it holds and stops its threads.

Logged events: ``jobs.worker.started``, ``jobs.worker.stopped``, ``jobs.worker.drain-signalled``,
``jobs.worker.drain-abandoned``, ``jobs.worker.tick-failed``, ``jobs.worker.settle-failed``,
``jobs.settle.unowned``, ``jobs.settle.refused``, ``jobs.attempt.interrupted``,
``jobs.heartbeat.failed``, ``jobs.lease.lost``, ``jobs.lease.rescued``, ``jobs.claim.exhausted``,
``jobs.timeout``, ``jobs.timeout.abandoned``, ``jobs.attempt.failed``, ``jobs.dead_lettered``,
``jobs.worker.presence-failed`` (its ``WorkerHeartbeat`` row, written once per heartbeat
interval by ``presence.Presence``), ``jobs.worker.task-failed``.

A run's ``timeout`` and its current step's ``step_timeout`` (``ctx.step.run``) are both enforced
by the loop: the cancel token is set first, then the attempt is failed. Once a settle statement
answered that a row settled, the settlement's ``after`` (``on_settled``, an event wait's
re-check) runs on a small hook pool, never on the claim loop.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any
from uuid import UUID

from django.db import DatabaseError, InterfaceError, OperationalError

from ultimate_jobs.conf import get_settings
from ultimate_jobs.db import JOBS_CHANNEL, close_connection, store_for
from ultimate_jobs.db.routing import single_alias
from ultimate_jobs.durations import to_seconds
from ultimate_jobs.errors import X_CONFIG_INVALID, X_DRAINING, X_JOB_CLAIM_QUEUES_EMPTY, JobsError
from ultimate_jobs.names import check_queue_name
from ultimate_jobs.runtime.claims import Claims, parse_concurrency
from ultimate_jobs.runtime.drain import Drain
from ultimate_jobs.runtime.heartbeat import Heartbeat
from ultimate_jobs.runtime.holdings import Attempt, Holdings
from ultimate_jobs.runtime.limits import ProcessLimits
from ultimate_jobs.runtime.presence import Presence
from ultimate_jobs.runtime.settling import Settler
from ultimate_jobs.runtime.slots import FleetSlots
from ultimate_jobs.service_loop import LoopedService, PassFailed, ServiceLoop, Stoppable

__all__ = ["Attempt", "Worker", "parse_concurrency"]

log = logging.getLogger("ultimate_jobs")

_DB_ERRORS = (OperationalError, InterfaceError, DatabaseError)
EXIT_GRACE = 5.0  # seconds past the drain timeout ``with Worker()`` waits for a run() on another thread


class Worker(LoopedService):
    """One worker process's claim loop; see the module docstring."""

    def __init__(self, *, queues: Sequence[str] | None = None, concurrency: Any = None,
                 max_in_flight: int | None = None, burst: bool = False, drain_timeout: Any = None,
                 database: str | None = None, worker_id: str | None = None,
                 on_pass: Callable[[Worker, list[Attempt]], None] | None = None,
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
        self.drain_timeout = conf.DRAIN_TIMEOUT if drain_timeout is None else to_seconds(
            drain_timeout, subject="drain_timeout", positive=False)
        self.alias = database or single_alias(self.queues)  # a routed queue's jobs live on its alias
        self.store = store_for(self.alias)
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{os.urandom(3).hex()}"
        self.visibility = conf.VISIBILITY_TIMEOUT
        self.heartbeat_interval = conf.HEARTBEAT_INTERVAL
        self.poll_interval = conf.POLL_INTERVAL
        self.idle_poll_max = max(conf.IDLE_POLL_MAX, conf.POLL_INTERVAL)
        self.on_pass = on_pass
        self.on_idle = on_idle
        self.state = "idle"
        self.presence = Presence(worker_id=self.worker_id, alias=self.alias, queues=self.queues,
                                 slots=self.capacity, visibility=self.visibility)
        self._loop = ServiceLoop(burst=burst, drains=True, on_signal=lambda signum: self.stop(X_DRAINING),
                                    on_second_signal=self._killed)
        self.holdings = Holdings(self._loop.wake)
        slots = FleetSlots(self.store, holder=self.worker_id, ttl=self.visibility,
                           wait_delay=max(self.poll_interval, 0.25))
        self.settler = Settler(store=self.store, worker_id=self.worker_id, visibility=self.visibility,
                               holdings=self.holdings, woken=self._loop.woken, on_db_error=self._db_failed,
                               db_errors=_DB_ERRORS)
        self.claims = Claims(store=self.store, alias=self.alias, worker_id=self.worker_id, queues=self.queues,
                             concurrency=self.concurrency, capacity=self.capacity,
                             limits=ProcessLimits(conf.LIMITS), slots=slots, holdings=self.holdings,
                             settler=self.settler, on_db_error=self._db_failed, db_errors=_DB_ERRORS,
                             prefetch=cap is None)
        self.heartbeat = Heartbeat(store=self.store, alias=self.alias, worker_id=self.worker_id,
                                  visibility=self.visibility, interval=self.heartbeat_interval,
                                  holdings=self.holdings, slots=slots, presence=self.presence, settler=self.settler,
                                  on_db_error=self._db_failed, db_errors=_DB_ERRORS)
        self.drain = Drain(timeout=self.drain_timeout, worker_id=self.worker_id, holdings=self.holdings,
                           settler=self.settler, loop=self._loop)
        self._pass_failed = False
        self._announced = False
        self._idle_wait = self.poll_interval
        self._exited = threading.Event()
        self._listener: Stoppable | None = None

    # -- one pass ---------------------------------------------------------------------------

    def run_once(self) -> list[Attempt]:
        """One pass: settle what finished and claim, then renew leases and hand back lapsed ones. Answer the
        runs started."""
        if self.claims.reconcile_due:
            self.claims.reconcile()
        self.holdings.collect()
        self.settler.expire_timeouts()
        started = self.claims.settle_and_claim(claiming=not self.drain.draining)
        # After the claim: a woken idle worker starts its job before the once-a-second rescue's
        # round trip (renewals and rescues are due on their own clocks). Rows the rescue made
        # runnable again are claimed in this same pass, as they were when the rescue came first.
        if self.heartbeat.keep() and not self.drain.draining:
            started += self.claims.settle_and_claim(claiming=True)
        if self.on_pass is not None:
            self.on_pass(self, started)
        return started

    @property
    def attempts(self) -> dict[UUID, Attempt]:
        """The attempts claimed and not yet settled, by job id."""
        return self.holdings.attempts

    @property
    def stats(self) -> dict[str, int]:
        return self.holdings.stats

    @property
    def in_flight(self) -> int:
        return self.holdings.in_flight()

    def _db_failed(self, event: str, exc: BaseException) -> None:
        self._pass_failed = True
        delay = self._loop.backoff.failed()
        if not self._loop.classified(exc, role=f"worker {self.worker_id}", alias=self.alias):
            log.warning("%s worker=%s error=%r retry_in=%.2fs", event, self.worker_id, exc, delay)
        close_connection(self.alias)

    # -- the loop ----------------------------------------------------------------------------------

    def stop(self, reason: str = X_DRAINING) -> None:
        """Stop claiming at once and cancel every held run with ``reason``; the loop then drains."""
        self.drain.begin(reason)

    def _killed(self, signum: int) -> None:
        log.warning("jobs.worker.killed worker=%s signal=%s: second signal, exiting at once", self.worker_id, signum)
        os._exit(1)

    def close(self, wait: float = 1.0) -> None:
        """Stop the body threads (idle ones exit at once; busy ones are abandoned) and the hook pool."""
        self.claims.close(wait)
        self.settler.close(wait)

    def wake(self, queue: str = "") -> None:
        if not queue or queue in self.queues:
            self._loop.wake()

    def _listen(self) -> Stoppable | None:
        self._listener = self.store.listen(channel=JOBS_CHANNEL, on_wake=self.wake, queues=self.queues)
        return self._listener

    @property
    def wake_unverified(self) -> bool:
        """The listener's last probe went unheard (``jobs.wake.unverified``): poll at ``POLL_INTERVAL``."""
        return bool(getattr(self._listener, "unverified", False))

    def _tick(self) -> float | None:
        """One pass of ``run()``; answer how long to wait before the next, or None to exit."""
        if not self._announced:
            # Written here rather than before the loop: a SIGTERM sent as soon as the row appears
            # must find the drain's handler installed, not the default one that kills the process.
            self._announced = True
            self.presence.beat([])
        self._pass_failed = False
        started = self.run_once()
        holdings = self.holdings
        if self.drain.draining and self.drain.over():
            return None
        if self._pass_failed:
            raise PassFailed
        if (not started and self.claims.unoffered and not self.drain.draining and not self._loop.stopping.is_set()
                and self.claims.free_capacity() > 0):
            return 0.0  # some queue was offered no slot since the last claim: offer it before waiting
        if (self.burst and not started and not holdings.attempts and not holdings.pending and not holdings.abandoned
                and time.monotonic() >= self.settler.burst_hold):
            if self.on_idle is not None and self.on_idle():
                return 0.0
            return self._loop.idle(0.0)
        if not holdings.done.empty():
            self._idle_wait = self.poll_interval
            self.settler.linger(self._loop.stopping)
            return 0.0
        if started and self.claims.last_claim_full and self.claims.free_capacity() > 0:
            self._idle_wait = self.poll_interval
            return 0.0  # more may be runnable now: no wait
        if started or holdings.attempts or self.wake_unverified:  # no idle backoff while the wake is unproven
            self._idle_wait = self.poll_interval
        else:
            self._idle_wait = min(self._idle_wait * 2, self.idle_poll_max)
        return min(self._idle_wait, self.heartbeat_interval)

    def _stopped(self) -> None:
        # Bodies abandoned at the drain deadline must not delay the exit: join nobody then.
        self.close(wait=0.0 if self.drain.abandoned else 1.0)
        self.presence.leave()
        self.state = "stopped"
        self._exited.set()
        log.info("jobs.worker.stopped worker=%s claimed=%s settled=%s interrupted=%s lost=%s", self.worker_id,
                 self.stats["claimed"], self.stats["settled"], self.stats["interrupted"], self.stats["lost"])

    def run(self, *, install_signals: bool = True) -> dict[str, int]:
        """Run until stopped (or, with ``burst``, until nothing is runnable); answer the run counts."""
        self.state = "running"
        self._announced = False  # the presence row is written by the first pass, once signals are handled
        log.info("jobs.worker.started worker=%s queues=%s capacity=%s", self.worker_id, ",".join(self.queues),
                 self.capacity)
        self._idle_wait = self.poll_interval
        try:
            self._loop.run(self._tick, install_signals=install_signals, listen=self._listen)
        finally:
            self._stopped()
        return dict(self.stats)

    # -- with Worker(...) as worker -------------------------------------------------------------

    def __enter__(self) -> Worker:
        return self  # nothing starts here: threads start with the first claimed run

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        """Drain what this worker holds (up to ``drain_timeout``), then stop its threads."""
        if self.state == "running":  # run() on another thread: stop it and wait for its drain
            self.stop()
            self._exited.wait(self.drain_timeout + EXIT_GRACE)
        elif self.state == "idle" and (self.holdings.attempts or self.holdings.pending):
            self.stop()
            try:
                self._loop.run(self._tick, install_signals=False)
            finally:
                self._stopped()
        self.close()
