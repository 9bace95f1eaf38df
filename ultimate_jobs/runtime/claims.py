"""Internal: the worker's claim loop — free slots per queue, the settle-and-claim statement, and
starting each claimed attempt on a body thread.

A pass splits the free slots over the queues (per-queue counts, or one shared number rotated so no
queue starves, capped by ``max_in_flight``), applies the per-process ``LIMITS`` (a tenant at its
limit is left out of the claim; an over-claim is shed back to ``ready`` uncounted) and has the
settler send one statement that settles what finished and claims into the free slots
(``Settler.settle_and_claim``). A claim whose answer was lost (a dropped connection) is reconciled
before the next claim.

Prefetch: while bodies are short (a moving average under ``PREFETCH_RUN_MAX``), a worker whose
concurrency is one shared number, with no ``max_in_flight`` and no ``LIMITS``, claims up to
``PREFETCH`` times its slots past them, so one round trip and one commit carry several jobs per
slot. Bodies still run ``concurrency`` at a time (the pool has that many threads; ``async def``
bodies wait on a semaphore of that size); a claimed attempt waits its turn holding its lease (renewed
with the others), its ``timeout`` counted from when its body starts. An attempt claimed past the slots
whose token is set before its body starts (a drain, a lost lease) goes back to ``ready`` uncounted:
its body never ran. Long bodies turn prefetch off, so a claimed job never waits behind one for long.

Logged events: ``jobs.worker.tick-failed``, ``jobs.worker.shed``, ``jobs.claim.reconciled``,
``jobs.reconcile.failed``.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from uuid import UUID

from ultimate_jobs import clock
from ultimate_jobs.conf import get_settings
from ultimate_jobs.db import ClaimedJob, Settlement, Store
from ultimate_jobs.errors import X_CONFIG_INVALID, JobsError
from ultimate_jobs.faults import fault
from ultimate_jobs.names import check_queue_name
from ultimate_jobs.registry import get_job_handle, registered_jobs
from ultimate_jobs.runtime import on_settled
from ultimate_jobs.runtime.execute import prepare_connections, run_attempt
from ultimate_jobs.runtime.execute_async import run_attempt_async
from ultimate_jobs.runtime.holdings import Attempt, Holdings, count
from ultimate_jobs.runtime.limits import ProcessLimits
from ultimate_jobs.runtime.outcome import Outcome
from ultimate_jobs.runtime.settling import Settler
from ultimate_jobs.runtime.slots import FleetSlots
from ultimate_jobs.runtime.threads import EventLoopThread, Pool

log = logging.getLogger("ultimate_jobs")

PREFETCH = 3  # claim up to this many times the slots beyond them while bodies are short
PREFETCH_RUN_MAX = 0.02  # seconds: a moving average of body time above this turns prefetch off
_AVERAGE_WEIGHT = 0.1  # each finished body's share of the moving average


def parse_concurrency(value: int | Mapping[str, int] | str | None, queues: Sequence[str]) -> dict[str, int] | int:
    """``10`` (shared by the queues) or ``{"a": 4, "b": 2}`` / ``"a=4,b=2"`` (per queue)."""
    if value is None:
        value = get_settings().CONCURRENCY
    if isinstance(value, str):
        value = _concurrency_text(value)
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


def _concurrency_text(text: str) -> int | dict[str, int]:
    """``"10"`` or ``"a=4,b=2"`` as a number or per-queue counts; ``X_CONFIG_INVALID`` for anything else."""
    try:
        if "=" not in text:
            return int(text)
        pairs = [part.split("=", 1) for part in text.split(",") if part.strip()]
        return {q.strip(): int(n) for q, n in pairs}
    except ValueError:
        raise JobsError(X_CONFIG_INVALID, f"concurrency {text!r} is neither a whole number nor queue=number pairs.",
                        "Pass a number of slots shared by the queues (--concurrency 10), or one per queue "
                        "(--concurrency emails=4,default=2).") from None


class Claims:
    """Claims runnable jobs into one worker's free slots and starts them."""

    def __init__(self, *, store: Store, alias: str, worker_id: str, queues: list[str],
                 concurrency: dict[str, int] | int, capacity: int, limits: ProcessLimits, slots: FleetSlots,
                 holdings: Holdings, settler: Settler, on_db_error: Callable[[str, BaseException], None],
                 db_errors: tuple[type[Exception], ...], prefetch: bool = False) -> None:
        self.store = store
        self.alias = alias
        self.worker_id = worker_id
        self.queues = queues
        self.concurrency = concurrency
        self.capacity = capacity
        self.limits = limits
        self.slots = slots
        self.holdings = holdings
        self.settler = settler
        self.reconcile_due = False  # a claim's answer was lost: hand back what it may have claimed
        self.last_claim_full = False  # the last claim filled some queue's slots: more may be runnable
        self._on_db_error = on_db_error
        self._db_errors = db_errors
        self._rotation = 0
        # Queues offered no slot since the last pass that claimed: with fewer shared slots than
        # queues a pass offers only some, so "nothing claimed" means nothing runnable only once
        # every queue has been offered one (the worker passes again at once until then).
        self.unoffered: set[str] = set(queues)
        self._pool: Pool | None = None
        self._loop: EventLoopThread | None = None
        self._async_gate: asyncio.Semaphore | None = None
        self._waiting: set[UUID] = set()  # claimed past the slots: waiting for a body thread
        self.prefetch = prefetch and isinstance(concurrency, int) and not limits.active
        # Moving average of body seconds (written by body threads; a float store is atomic). It starts
        # high: prefetch begins once some 40 bodies have shown they are short.
        self.body_time = 1.0

    def claim_capacity(self) -> int:
        """How many runs this worker may hold: its slots, and while bodies are short its prefetch too."""
        if self.prefetch and self.body_time < PREFETCH_RUN_MAX:
            return self.capacity * (1 + PREFETCH)
        return self.capacity

    def free_capacity(self) -> int:
        return self.claim_capacity() - len(self.holdings.attempts) - len(self.holdings.abandoned)

    def free_slots(self) -> dict[str, int]:
        """Free slots per queue for this pass, split so no queue starves."""
        held = self.holdings.held()  # attempts settling in this pass's transaction have free slots already
        free = self.claim_capacity() - len(held) - len(self.holdings.abandoned)
        if free <= 0:
            return {}
        if isinstance(self.concurrency, dict):
            busy = count(attempt.claimed.queue for attempt in held)
            slots = {q: max(0, self.concurrency[q] - busy.get(q, 0)) for q in self.queues}
            self.unoffered.clear()  # each queue has its own slots: a full one is busy, not skipped
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
        offered = {q: n for q, n in slots.items() if n > 0}
        self.unoffered.difference_update(offered)
        return offered

    def settle_and_claim(self, *, claiming: bool) -> list[Attempt]:
        """Settle what finished and, when ``claiming``, claim into the free slots, in one
        transaction (one commit); answer the attempts started."""
        holdings = self.holdings
        names = [handle.name for handle in registered_jobs()]
        claims = self.free_slots() if claiming and names else {}
        if not names:
            self.unoffered.clear()  # no job is declared: no queue has anything this worker could run
        blocked: list[str] = []
        if claims and self.limits.active:
            held = holdings.held()
            claims = self.limits.cap_slots(claims, count(r.claimed.queue for r in held), len(held))
            blocked = self.limits.blocked_tenants(count(r.claimed.tenant_id for r in held if r.claimed.tenant_id))
        if not claims and not holdings.pending:
            return []
        claimed = self.settler.settle_and_claim(claims=claims, names=names, blocked=blocked)
        if claimed is None:
            # The claim may have committed with its answer lost: reconcile before the next claim.
            self.reconcile_due = bool(claims)
            return []
        self.last_claim_full = any(len(claimed.get(q, ())) == n for q, n in claims.items())
        if any(claimed.values()):
            fault("after_claim")
            self.unoffered = set(self.queues)
        started = []
        # Per-tenant counts are taken once per pass and kept current as runs start.
        by_tenant = count(r.claimed.tenant_id for r in holdings.held()) if self.limits.active else {}
        busy = len(holdings.held())
        for row in (row for rows in claimed.values() for row in rows):
            if self.limits.active and not self.limits.admit(row.tenant_id, by_tenant):
                self._shed(row)
                continue
            if busy >= self.capacity:
                self._waiting.add(row.id)
            busy += 1
            started.append(self._start(row))
            if row.tenant_id is not None:
                by_tenant[row.tenant_id] = by_tenant.get(row.tenant_id, 0) + 1
        holdings.stats["claimed"] += len(started)
        return started

    def reconcile(self) -> None:
        """Hand back rows claimed under this worker's id that it does not hold: a claim whose commit
        landed but whose answer was lost (a dropped connection). Uncounted: those bodies never ran."""
        held = [r.id for r in self.holdings.attempts.values()] + [r.id for r in self.holdings.abandoned]
        try:
            returned = self.store.job_release_unheld(worker_id=self.worker_id, held=held, now=clock.sql_now())
        except self._db_errors as exc:
            self._on_db_error("jobs.reconcile.failed", exc)
            return
        self.reconcile_due = False
        if returned:
            log.warning("jobs.claim.reconciled worker=%s returned=%s: a claim's answer was lost; its rows are "
                        "back to ready, uncounted", self.worker_id, len(returned))

    def _shed(self, claimed: ClaimedJob) -> None:
        """Hand a claim the per-process limits refuse straight back: ``ready``, uncounted, no error."""
        log.info("jobs.worker.shed job_id=%s name=%s queue=%s tenant=%s", claimed.id, claimed.name, claimed.queue,
                 claimed.tenant_id)
        attempt = Attempt(claimed=claimed, handle=get_job_handle(claimed.name))  # type: ignore[arg-type]
        attempt.outcome = Outcome(Settlement(claimed.id, claimed.claim, "ready", uncount=True))
        attempt.finished.set()
        self.holdings.pending.append(attempt)
        self.holdings.stats["shed"] += 1

    def _start(self, claimed: ClaimedJob) -> Attempt:
        handle = get_job_handle(claimed.name)
        assert handle is not None  # the claim asked only for registered names
        if claimed.sensitive and not handle.sensitive:
            # The row says sensitive (it was enqueued under a declaration that said so): this run's
            # stored errors, step errors, spans and logs are masked as the declaration's would be.
            handle = copy.copy(handle)
            handle.sensitive = True
        attempt = Attempt(claimed=claimed, handle=handle)
        self.holdings.attempts[claimed.id] = attempt
        if handle.is_async:
            if self._loop is None:
                self._loop = EventLoopThread(self.capacity, before=prepare_connections)
            self._loop.submit(self._execute_async(attempt))
        else:
            if self._pool is None:
                self._pool = Pool(self.capacity)
            self._pool.submit(lambda: self._execute(attempt))
        return attempt

    def _begin(self, attempt: Attempt) -> bool:
        """An attempt's body is about to start: answer False (and hand it back) when it was claimed past
        the slots and its token was set while it waited its turn; else start its clocks."""
        waited = attempt.id in self._waiting
        self._waiting.discard(attempt.id)
        if waited and attempt.token.is_set():
            attempt.outcome = Outcome(Settlement(attempt.claimed.id, attempt.claimed.claim, "ready", uncount=True))
            return False
        if attempt.handle.timeout is not None:
            attempt.deadline = time.monotonic() + attempt.handle.timeout
        return True

    def _ran(self, began: float) -> None:
        self.body_time += (time.monotonic() - began - self.body_time) * _AVERAGE_WEIGHT

    def _execute(self, attempt: Attempt) -> None:
        try:
            if not self._begin(attempt):
                return
            began = time.monotonic()
            busy = self.slots.acquire(attempt)
            if busy is not None:
                # a refusal reaches on_settled
                attempt.outcome = on_settled.attach(attempt.handle, attempt.claimed, busy)
                return
            try:
                attempt.outcome = run_attempt(attempt.handle, attempt.claimed, attempt.token, alias=self.alias)
            finally:
                self.slots.release(attempt)
                self._ran(began)
        finally:
            self.holdings.finish(attempt)

    async def _execute_async(self, attempt: Attempt) -> None:
        loop = self._loop
        assert loop is not None  # this coroutine runs on it
        if self._async_gate is None:  # created on the loop's thread, where it is used
            self._async_gate = asyncio.Semaphore(self.capacity)
        try:
            async with self._async_gate:  # prefetched attempts wait here: ``capacity`` bodies at a time
                if not self._begin(attempt):
                    return
                began = time.monotonic()
                busy = await asyncio.to_thread(self.slots.acquire, attempt) if attempt.handle.concurrency else None
                if busy is not None:
                    attempt.outcome = on_settled.attach(attempt.handle, attempt.claimed, busy)
                    return
                try:
                    attempt.outcome = await run_attempt_async(attempt.handle, attempt.claimed, attempt.token,
                                                              alias=self.alias, executor=loop.executor)
                finally:
                    if attempt.slot is not None:
                        await asyncio.to_thread(self.slots.release, attempt)
                    self._ran(began)
        finally:
            self.holdings.finish(attempt)

    def close(self, wait: float) -> None:
        """Stop the body threads (idle ones exit at once; busy ones are abandoned)."""
        if self._pool is not None:
            self._pool.shutdown(wait)
            self._pool = None
        if self._loop is not None:
            self._loop.shutdown(wait)
            self._loop = None
