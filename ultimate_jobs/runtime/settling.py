"""Internal: the worker's settle batching — finished runs settle together, one statement per pass.

A pass settles every run that finished since the last one in the statement that also claims
(``claims.Claims``); the drain's last passes settle alone (``Settler.settle``). ``linger`` lets a
pass wait a moment for more runs to finish, so one commit settles many. Once a settle statement
answered that a row settled, its ``after`` (``on_settled``, an event wait's re-check) runs on a
small hook pool, never on the claim loop. A run past its ``timeout`` (or its step's
``step_timeout``) is failed here and abandoned to its thread (``expire_timeouts``).

Logged events: ``jobs.settle.failed``, ``jobs.settle.lost``, ``jobs.timeout``.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from uuid import UUID

from ultimate_jobs import clock
from ultimate_jobs.db import Store
from ultimate_jobs.runtime import deadlines
from ultimate_jobs.runtime.runs import Holdings, Run
from ultimate_jobs.runtime.threads import Pool, run_and_close

log = logging.getLogger("ultimate_jobs")

SETTLE_LINGER = 0.002  # seconds a pass waits for more runs to finish before it settles
HOOK_THREADS = 2


class Settler:
    """Settles one worker's finished runs and runs what waits for a settle to land."""

    def __init__(self, *, store: Store, worker_id: str, visibility: float, holdings: Holdings,
                 woken: threading.Event, on_db_error: Callable[[str, BaseException], None],
                 db_errors: tuple[type[Exception], ...]) -> None:
        self.store = store
        self.worker_id = worker_id
        self.visibility = visibility
        self.holdings = holdings
        self.burst_hold = 0.0  # a --burst worker waits until runs handed back for later are due
        self._woken = woken
        self._on_db_error = on_db_error
        self._db_errors = db_errors
        self._hooks: Pool | None = None  # what runs once a settle landed: on_settled, event re-checks

    def settle(self) -> None:
        """Settle what finished without claiming (the drain's last passes)."""
        batch = self.holdings.pending
        if not batch:
            return
        try:
            settled = self.store.job_settle_and_claim(
                settlements=[r.outcome for r in batch if r.outcome is not None], claims={}, names=[],
                worker_id=self.worker_id, visibility=self.visibility, now=clock.sql_now()).settled
        except self._db_errors as exc:
            self._on_db_error("jobs.settle.failed", exc)
            return  # kept pending: the fenced statement is safe to send again
        self.holdings.pending = []
        self.record(batch, settled)

    def record(self, batch: list[Run], settled: set[UUID]) -> None:
        """Count what the settle statement answered for ``batch``: the ids in ``settled`` landed."""
        stats = self.holdings.stats
        for run in batch:
            run.settled = True
            self.holdings.forget(run)
            assert run.outcome is not None
            if run.id not in settled:
                stats["lost"] += 1
                log.warning("jobs.settle.lost job_id=%s name=%s queue=%s outcome=%s: the row is no longer this "
                            "worker's (cancelled or reclaimed)", run.id, run.claimed.name, run.claimed.queue,
                            run.outcome.state)
            else:
                # A suspension settled (state suspended, attempt handed back): counted as settled.
                if run.outcome.uncount and run.outcome.state != "suspended":
                    stats["interrupted"] += 1
                    if run.outcome.delay:  # handed back for later (a busy key): --burst waits it out
                        self.burst_hold = max(self.burst_hold, time.monotonic() + run.outcome.delay)
                else:
                    stats["settled"] += 1
                self.after(run.outcome.after)

    def after(self, task: Callable[[], object] | None) -> None:
        """Run what waits for a settle to have landed (``on_settled``, an event wait's re-check),
        off the claim loop: a slow hook never delays a pass."""
        if task is None:
            return
        if self._hooks is None:
            self._hooks = Pool(HOOK_THREADS, prefix="ultimate-jobs-hook")
        self._hooks.submit(functools.partial(run_and_close, task))

    def expire_timeouts(self) -> None:
        """Fail every run past its deadline at once; its body is abandoned to its thread."""
        now = time.monotonic()
        holdings = self.holdings
        for run in [r for r in holdings.runs.values() if not r.finished.is_set() and not r.settled]:
            if not deadlines.expired(run.claimed, run.handle, run.token, run.deadline, now):
                continue
            log.warning("jobs.timeout job_id=%s name=%s queue=%s", run.id, run.claimed.name, run.claimed.queue)
            outcome = deadlines.timed_out_outcome(run.handle, run.claimed, run.token, self.store)
            try:
                landed = self.store.job_settle_many(settlements=[outcome] if outcome else [], now=clock.sql_now())
            except self._db_errors as exc:
                self._on_db_error("jobs.settle.failed", exc)
                continue
            run.settled = True
            holdings.stats["settled"] += 1
            holdings.forget(run)
            holdings.abandoned.add(run)
            if outcome is not None and outcome.id in landed:
                self.after(outcome.after)

    def linger(self, stopping: threading.Event) -> None:
        """Some runs finished: wait up to ``SETTLE_LINGER`` for the rest, so one commit settles many.

        Short bodies finish within microseconds of each other; settling each as it lands would
        spend a commit (an fsync) per job. Long bodies end the wait at once (nothing else is close).
        """
        deadline = time.monotonic() + SETTLE_LINGER
        while not stopping.is_set():
            remaining = deadline - time.monotonic()
            if not self.holdings.unfinished() or remaining <= 0:
                return
            self._woken.clear()
            if not self._woken.wait(remaining):
                return

    def close(self, wait: float) -> None:
        if self._hooks is not None:
            self._hooks.shutdown(wait)
            self._hooks = None
