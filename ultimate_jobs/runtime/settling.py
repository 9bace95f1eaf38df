"""Internal: the one owner of settle statements — the worker's settle batching, the one error path
every settle takes, and what runs once a settle landed.

A pass settles every run that finished since the last one in the statement that also claims
(``Settler.settle_and_claim``, for ``claims.Claims``: one round trip); the drain's last passes
settle alone (``settle``); an attempt past its ``timeout`` (or its step's ``step_timeout``) is
failed here and abandoned to its thread (``expire_timeouts``); the test runner settles one attempt
at a time (``Settler.alone``, ``settle_alone``). ``linger`` lets a pass wait a moment for more
attempts to finish, so one commit settles many. Once a settle statement answered that a row
settled, its outcome's ``after`` (``on_settled``, an event wait's re-check) runs once, on a small
hook pool, never on the claim loop (the test runner's on its own thread); a row the statement did
not settle runs nothing.

Every failed settle statement takes one path (``_failed``): it is reported (the worker logs it,
backs off and drops the connection; the test runner raises it) and what it carried stays pending,
as the fenced statement is safe to send again. A batch the database refuses for a value, not for a
lost connection, is settled again one attempt at a time, and an attempt refused alone settles with
its outcome made storable (``_settle_each``): nothing a job body returns or raises can stop a worker
settling the others. An exception's ``code`` is stored only when it is a code (``X_`` then up to 62
of ``A-Z0-9_``, the column's 64); any other value settles as ``X_JOB_FAILED`` with the original
named in the error text (``storable``).

Logged events: ``jobs.worker.settle-failed``, ``jobs.worker.tick-failed`` (the pass's statement),
``jobs.settle.unowned``, ``jobs.settle.refused``, ``jobs.attempt.interrupted``, ``jobs.timeout``.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from uuid import UUID

from django.db import DatabaseError, InterfaceError, OperationalError

from ultimate_jobs import clock
from ultimate_jobs.conf import get_settings
from ultimate_jobs.db import ClaimedJob, Settlement, Store
from ultimate_jobs.errors import X_JOB_FAILED, db_error_code
from ultimate_jobs.faults import fault
from ultimate_jobs.runtime import deadlines, on_settled
from ultimate_jobs.runtime.holdings import Attempt, Holdings
from ultimate_jobs.runtime.outcome import Outcome
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
    """Sends one worker's settle statements (or the test runner's), takes their one error path, and
    runs what waits for a settle to land."""

    def __init__(self, *, store: Store, worker_id: str, visibility: float, holdings: Holdings,
                 woken: threading.Event, on_db_error: Callable[[str, BaseException], None],
                 db_errors: tuple[type[Exception], ...], inline: bool = False) -> None:
        self.store = store
        self.worker_id = worker_id
        self.visibility = visibility
        self.holdings = holdings
        self.burst_hold = 0.0  # a --burst worker waits until attempts handed back for later are due
        self._woken = woken
        self._on_db_error = on_db_error
        self._db_errors = db_errors
        self._inline = inline  # what waits for a settle runs on the calling thread (the test runner)
        self._hooks: Pool | None = None  # what runs once a settle landed: on_settled, event re-checks

    @classmethod
    def alone(cls, store: Store, worker_id: str) -> Settler:
        """A settler for attempts settled one at a time on the calling thread (the test runner): a
        failed statement raises to the caller, and what waits for a settle runs on the caller's
        thread, inside its transaction."""
        return cls(store=store, worker_id=worker_id, visibility=get_settings().VISIBILITY_TIMEOUT,
                   holdings=Holdings(wake=_nothing), woken=threading.Event(), on_db_error=_raise,
                   db_errors=(DatabaseError,), inline=True)

    def settle_and_claim(self, *, claims: dict[str, int], names: Sequence[str],
                         blocked: Sequence[str] = ()) -> dict[str, list[ClaimedJob]] | None:
        """The pass's one statement: settle every pending attempt and claim up to ``claims``
        (``{queue: limit}``) of ``names``, leaving out the ``blocked`` tenants. Answer the rows
        claimed per queue, or None when the statement failed (``jobs.worker.tick-failed``; the claim may
        have committed with its answer lost)."""
        return self._pass(claims, names, blocked, failed="jobs.worker.tick-failed", fault_point="before_ack")

    def settle(self) -> None:
        """Settle what finished without claiming (the drain's last passes)."""
        if self.holdings.pending:
            self._pass({}, [], (), failed="jobs.worker.settle-failed", fault_point=None)

    def _pass(self, claims: dict[str, int], names: Sequence[str], blocked: Sequence[str], *, failed: str,
              fault_point: str | None) -> dict[str, list[ClaimedJob]] | None:
        batch = self.holdings.pending
        try:
            if batch and fault_point is not None:
                fault(fault_point)
            answer = self.store.job_settle_and_claim(
                settlements=[storable(r.outcome.settlement) for r in batch if r.outcome is not None],
                claims=claims, names=names, worker_id=self.worker_id, visibility=self.visibility,
                now=clock.sql_now(), blocked_tenants=blocked)
        except self._db_errors as exc:
            self._failed(failed, exc, fallback=bool(batch))
            return None
        self.holdings.pending = []
        self._record(batch, answer.settled)
        return answer.claimed

    def settle_alone(self, outcome: Outcome) -> bool | None:
        """Settle ``outcome`` in a statement of its own (a timed-out attempt; the test runner's) and
        run its ``after`` once it landed. Answer whether its row settled, or None when the statement
        failed (``jobs.worker.settle-failed``; whoever holds the outcome sends it again)."""
        try:
            landed = self.store.job_settle_many(settlements=[outcome.settlement], now=clock.sql_now())
        except self._db_errors as exc:
            self._failed("jobs.worker.settle-failed", exc, fallback=False)
            return None
        if outcome.settlement.id not in landed:
            return False
        self.after(outcome.after)
        return True

    def _failed(self, event: str, exc: Exception, *, fallback: bool) -> None:
        """The one path of a failed settle statement: report it as ``event``; when it carried the
        pending batch (``fallback``) and the database refused a value rather than lost the
        connection, settle the batch again one attempt at a time (``_settle_each``). What did not
        settle stays pending: the fenced statement is safe to send again."""
        self._on_db_error(event, exc)
        if fallback and not isinstance(exc, CONNECTION_ERRORS) and db_error_code(exc) is None:
            self._settle_each()  # a known setup error (a pooler's prepared statements) is no refused value

    def _settle_each(self) -> None:
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
                settled |= self._settle_refusable(attempt, attempt.outcome.settlement)
            except self._db_errors as exc:
                self._failed("jobs.worker.settle-failed", exc, fallback=False)
                break
            done.append(attempt)
        if done:
            landed = set(map(id, done))
            self.holdings.pending = [r for r in batch if id(r) not in landed]
            self._record(done, settled)

    def _settle_refusable(self, attempt: Attempt, settlement: Settlement) -> set[UUID]:
        """Settle one attempt alone; when the database refuses a value in it, log
        ``jobs.settle.refused`` and settle it as ``refused`` says. A connection failure raises."""
        try:
            return self.store.job_settle_many(settlements=[storable(settlement)], now=clock.sql_now())
        except self._db_errors as exc:
            if isinstance(exc, CONNECTION_ERRORS) or db_error_code(exc) is not None:
                raise
            log.error("jobs.settle.refused job_id=%s name=%s queue=%s error=%r: settled with the "
                      "outcome made storable", attempt.id, attempt.claimed.name, attempt.claimed.queue, exc)
            return self.store.job_settle_many(settlements=[refused(attempt, exc)], now=clock.sql_now())

    def _record(self, batch: list[Attempt], settled: set[UUID]) -> None:
        """Count what the settle statement answered for ``batch``: the ids in ``settled`` landed,
        and their outcomes' ``after`` runs."""
        stats = self.holdings.stats
        for attempt in batch:
            attempt.settled = True
            self.holdings.forget(attempt)
            assert attempt.outcome is not None
            outcome = attempt.outcome.settlement
            if attempt.id not in settled:
                stats["lost"] += 1
                log.warning("jobs.settle.unowned job_id=%s name=%s queue=%s outcome=%s: the row is no longer this "
                            "worker's (cancelled or reclaimed)", attempt.id, attempt.claimed.name,
                            attempt.claimed.queue, outcome.state)
            else:
                # A suspension settled (state suspended, attempt handed back): counted as settled.
                if outcome.uncount and outcome.state != "suspended":
                    stats["interrupted"] += 1
                    if outcome.delay:  # handed back for later (a busy key): --burst waits it out
                        self.burst_hold = max(self.burst_hold, time.monotonic() + outcome.delay)
                    else:  # stopped by the drain (or a lost slot): back to ready, the attempt uncounted
                        log.info("jobs.attempt.interrupted job_id=%s name=%s queue=%s reason=%s", attempt.id,
                                 attempt.claimed.name, attempt.claimed.queue, attempt.token.reason)
                else:
                    stats["settled"] += 1
                self.after(attempt.outcome.after)

    def after(self, task: Callable[[], object] | None) -> None:
        """Run what waits for a settle to have landed (``on_settled``, an event wait's re-check),
        off the claim loop: a slow hook never delays a pass. Inline (the test runner): on this
        thread, ``on_settled`` delivered on it too."""
        if task is None:
            return
        if self._inline:
            with on_settled.inline():
                task()
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
            if self.settle_alone(outcome) is None:
                continue  # failed: its deadline has still passed at the next pass
            attempt.settled = True
            holdings.stats["settled"] += 1
            holdings.forget(attempt)
            holdings.abandoned.add(attempt)

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


def _nothing() -> None:
    """A wake-up nobody waits for (``Settler.alone``'s holdings)."""


def _raise(event: str, exc: BaseException) -> None:
    """``Settler.alone``'s report of a failed statement: the caller gets the error itself."""
    raise exc
