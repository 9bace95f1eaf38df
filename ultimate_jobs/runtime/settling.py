"""Internal: the worker's settle batching — finished runs settle together, one statement per pass.

A pass settles every run that finished since the last one in the statement that also claims
(``claims.Claims``); the drain's last passes settle alone (``Settler.settle``). ``linger`` lets a
pass wait a moment for more attempts to finish, so one commit settles many. Once a settle statement
answered that a row settled, its outcome's ``after`` (``on_settled``, an event wait's re-check) runs on a
small hook pool, never on the claim loop. An attempt past its ``timeout`` (or its step's
``step_timeout``) is failed here and abandoned to its thread (``expire_timeouts``).

An exception's ``code`` is stored only when it is a code (``X_`` then up to 62 of ``A-Z0-9_``,
the column's 64); any other value settles as ``X_JOB_FAILED`` with the original named in the error
text (``storable``). A batch the database refuses for a value, not for a lost connection, is settled
again one attempt at a time, and an attempt refused alone settles with its outcome made storable
(``settle_each``): nothing a job body returns or raises can stop a worker settling the others.

Logged events: ``jobs.settle.failed``, ``jobs.settle.lost``, ``jobs.settle.refused``, ``jobs.timeout``.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import time
from collections.abc import Callable
from uuid import UUID

from django.db import InterfaceError, OperationalError

from ultimate_jobs import clock
from ultimate_jobs.db import Settlement, Store
from ultimate_jobs.errors import X_JOB_FAILED
from ultimate_jobs.runtime import deadlines
from ultimate_jobs.runtime.holdings import Attempt, Holdings
from ultimate_jobs.runtime.threads import Pool, run_and_close

log = logging.getLogger("ultimate_jobs")

SETTLE_LINGER = 0.002  # seconds a pass waits for more attempts to finish before it settles
HOOK_THREADS = 2
STORABLE_CODE = re.compile(r"X_[A-Z0-9_]{1,62}\Z")  # what the 64-character error_code column holds
CONNECTION_ERRORS = (OperationalError, InterfaceError)  # the connection failed, not a value in the batch


def storable(outcome: Settlement) -> Settlement:
    """``outcome`` with an exception ``code`` that is not a storable code replaced by ``X_JOB_FAILED``,
    the original kept (shortened, escaped) in the error text."""
    code = outcome.error_code
    if code is None or STORABLE_CODE.match(code):
        return outcome
    note = f"(the exception's code {code[:100]!r} is not an X_ code; stored as {X_JOB_FAILED})"
    return outcome._replace(error_code=X_JOB_FAILED, last_error=f"{outcome.last_error or ''}\n{note}".lstrip())


def refused(attempt: Attempt, exc: BaseException) -> Settlement:
    """The last resort for an attempt whose settle the database refused on its own: no result, the
    error text escaped, the code generic; a success that cannot be stored ends the run."""
    outcome = (storable(attempt.outcome.settlement) if attempt.outcome is not None
               else Settlement(attempt.id, attempt.claimed.claim, "failed"))
    state = outcome.state
    if state == "done":
        state = "dead" if attempt.handle.retry.dead_letter else "failed"
    text = f"{outcome.last_error or ''}\n(the outcome could not be stored: {type(exc).__name__}: {exc})".lstrip()
    return outcome._replace(state=state, result=None, error_code=X_JOB_FAILED,
                            last_error=text.replace("\x00", "\\x00")[:20_000],
                            stop_reason=outcome.stop_reason or ("terminal" if state != outcome.state else None))


class Settler:
    """Settles one worker's finished attempts and attempts what waits for a settle to land."""

    def __init__(self, *, store: Store, worker_id: str, visibility: float, holdings: Holdings,
                 woken: threading.Event, on_db_error: Callable[[str, BaseException], None],
                 db_errors: tuple[type[Exception], ...]) -> None:
        self.store = store
        self.worker_id = worker_id
        self.visibility = visibility
        self.holdings = holdings
        self.burst_hold = 0.0  # a --burst worker waits until attempts handed back for later are due
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
                settlements=self.outcomes(batch), claims={}, names=[],
                worker_id=self.worker_id, visibility=self.visibility, now=clock.sql_now()).settled
        except self._db_errors as exc:
            self._on_db_error("jobs.settle.failed", exc)
            if not isinstance(exc, CONNECTION_ERRORS):
                self.settle_each()
            return  # kept pending: the fenced statement is safe to send again
        self.holdings.pending = []
        self.record(batch, settled)

    @staticmethod
    def outcomes(batch: list[Attempt]) -> list[Settlement]:
        """The settlements to send for ``batch``, each storable."""
        return [storable(r.outcome.settlement) for r in batch if r.outcome is not None]

    def settle_each(self) -> None:
        """The batch settle failed on a value: settle the pending runs one statement each, so one
        row the database refuses holds back no other; a refused row settles as ``refused`` says.
        A connection failure stops the walk (what is left stays pending for the next pass)."""
        batch = self.holdings.pending
        done: list[Attempt] = []
        settled: set[UUID] = set()
        for attempt in batch:
            if attempt.outcome is None:
                continue
            try:
                try:
                    settled |= self.store.job_settle_many(settlements=[storable(attempt.outcome.settlement)],
                                                          now=clock.sql_now())
                except self._db_errors as exc:
                    if isinstance(exc, CONNECTION_ERRORS):
                        raise
                    log.error("jobs.settle.refused job_id=%s name=%s queue=%s error=%r: settled with the "
                              "outcome made storable", attempt.id, attempt.claimed.name, attempt.claimed.queue, exc)
                    settled |= self.store.job_settle_many(settlements=[refused(attempt, exc)], now=clock.sql_now())
            except self._db_errors as exc:
                self._on_db_error("jobs.settle.failed", exc)
                break
            done.append(attempt)
        if done:
            landed = set(map(id, done))
            self.holdings.pending = [r for r in batch if id(r) not in landed]
            self.record(done, settled)

    def record(self, batch: list[Attempt], settled: set[UUID]) -> None:
        """Count what the settle statement answered for ``batch``: the ids in ``settled`` landed."""
        stats = self.holdings.stats
        for attempt in batch:
            attempt.settled = True
            self.holdings.forget(attempt)
            assert attempt.outcome is not None
            outcome = attempt.outcome.settlement
            if attempt.id not in settled:
                stats["lost"] += 1
                log.warning("jobs.settle.lost job_id=%s name=%s queue=%s outcome=%s: the row is no longer this "
                            "worker's (cancelled or reclaimed)", attempt.id, attempt.claimed.name,
                            attempt.claimed.queue, outcome.state)
            else:
                # A suspension settled (state suspended, attempt handed back): counted as settled.
                if outcome.uncount and outcome.state != "suspended":
                    stats["interrupted"] += 1
                    if outcome.delay:  # handed back for later (a busy key): --burst waits it out
                        self.burst_hold = max(self.burst_hold, time.monotonic() + outcome.delay)
                else:
                    stats["settled"] += 1
                self.after(attempt.outcome.after)

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
        for attempt in [r for r in holdings.attempts.values() if not r.finished.is_set() and not r.settled]:
            if not deadlines.expired(attempt.claimed, attempt.handle, attempt.token, attempt.deadline, now):
                continue
            log.warning("jobs.timeout job_id=%s name=%s queue=%s", attempt.id, attempt.claimed.name,
                        attempt.claimed.queue)
            outcome = deadlines.timed_out_outcome(attempt.handle, attempt.claimed, attempt.token, self.store)
            outcome = outcome._replace(settlement=outcome.settlement._replace(elapsed=now - attempt.started))
            try:
                landed = self.store.job_settle_many(settlements=[outcome.settlement], now=clock.sql_now())
            except self._db_errors as exc:
                self._on_db_error("jobs.settle.failed", exc)
                continue
            attempt.settled = True
            holdings.stats["settled"] += 1
            holdings.forget(attempt)
            holdings.abandoned.add(attempt)
            if outcome.settlement.id in landed:
                self.after(outcome.after)

    def linger(self, stopping: threading.Event) -> None:
        """Some attempts finished: wait up to ``SETTLE_LINGER`` for the rest, so one commit settles many.

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
