"""Internal: what every store answers, and how the core finds the store for an alias.

The core (enqueue, worker, ops) speaks to a store, never to SQL: ``PostgresStore``
(``db/postgres.py``) and ``SqliteStore`` (``db/sqlite.py``) implement the same methods, named
``<entity>_<verb>`` with keyword-only arguments, and one conformance suite runs on both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple, Protocol
from uuid import UUID


class ClaimedJob(NamedTuple):
    """A claimed row: exactly what the worker needs to run it, no ORM object."""

    id: UUID
    run_id: UUID
    name: str
    queue: str
    payload: str
    attempt: int
    max_attempts: int
    claim: UUID
    tenant_id: str | None
    enqueued_by: str | None
    priority: int
    concurrency_key: str | None
    traceparent: str | None


class Settlement(NamedTuple):
    """How one attempt ended. ``state`` is a final state, ``retry``, ``ready`` (interrupted:
    back at once) or ``suspended``; ``uncount`` hands the attempt back. ``after`` runs once the
    settle statement answered that this row settled (``on_settled``, an event wait's re-check);
    the stores never read it."""

    id: UUID
    claim: UUID
    state: str
    result: str | None = None
    last_error: str | None = None
    error_code: str | None = None
    stop_reason: str | None = None
    delay: float = 0.0
    uncount: bool = False
    after: Callable[[], None] | None = None


class StepRow(NamedTuple):
    """One stored step as a replay reads it. ``output`` and ``event_match`` are JSON text;
    ``remaining`` is the seconds until ``wake_at`` on the store's clock at read time."""

    name: str
    status: str
    output: str | None
    executions: int
    seq: int
    started_at: datetime | None
    wake_at: datetime | None
    remaining: float | None
    event: str | None
    event_match: str | None


# What a fenced step write answers: the row was written; the fence held but the step was
# completed already (nothing overwritten); the job is no longer running under this claim.
WRITTEN, ALREADY_COMPLETED, FENCED_OUT = "written", "already-completed", "fenced-out"


class LeaderLease(NamedTuple):
    """One election's answer. ``now`` is the database's clock (the process clock on SQLite);
    ``expires_at`` is this lease's expiry when ``leading``, else the current holder's."""

    leading: bool
    now: datetime
    expires_at: datetime | None
    holder: str | None
    version: int


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRow:
    """One validated row, ready for the store: an enqueue, or a staged outbox row being published
    (under the ids it was staged with, ``delay`` 0 and its ``run_at`` fixed at staging)."""

    id: UUID
    run_id: UUID
    name: str
    queue: str
    priority: int
    payload: str
    idempotency_key: str
    tenant_id: str | None
    enqueued_by: str | None
    max_attempts: int
    delay: float
    run_at: datetime | None
    concurrency_key: str | None
    traceparent: str | None
    dedupe_key: tuple[str, str, str] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "dedupe_key", (self.name, self.tenant_id or "", self.idempotency_key))

    @classmethod
    def staged(cls, id: UUID, run_id: UUID, name: str, queue: str, priority: int, payload: str,  # noqa: A002
               idempotency_key: str, tenant_id: str | None, enqueued_by: str | None, max_attempts: int,
               run_at: datetime, concurrency_key: str | None, traceparent: str | None) -> JobRow:
        """A claimed outbox row, in the column order the stores select it."""
        return cls(id=id, run_id=run_id, name=name, queue=queue, priority=priority, payload=payload,
                   idempotency_key=idempotency_key, tenant_id=tenant_id, enqueued_by=enqueued_by,
                   max_attempts=max_attempts, delay=0.0, run_at=run_at, concurrency_key=concurrency_key,
                   traceparent=traceparent)


class Store(Protocol):
    alias: str
    supports_listen_notify: bool

    def job_insert_many(self, *, rows: Sequence[JobRow], now: datetime | None,
                        notify: Sequence[str] = ()) -> list[tuple[UUID, UUID, bool]]: ...

    def job_claim(self, *, queue: str, names: Sequence[str], limit: int, worker_id: str, visibility: float,
                  now: datetime | None, blocked_tenants: Sequence[str] = ()) -> list[ClaimedJob]: ...

    def job_settle_many(self, *, settlements: Sequence[Settlement], now: datetime | None) -> set[UUID]: ...

    def job_settle_and_claim(self, *, settlements: Sequence[Settlement], claims: dict[str, int],
                             names: Sequence[str], worker_id: str, visibility: float,
                             now: datetime | None, blocked_tenants: Sequence[str] = (),
                             ) -> tuple[set[UUID], dict[str, list[ClaimedJob]]]: ...

    def lease_acquire(self, *, key: str, limit: int, job_id: UUID, holder: str, ttl: float,
                      now: datetime | None) -> int | None: ...

    def lease_renew(self, *, held: Sequence[tuple[str, int, UUID]], holder: str, ttl: float,
                    now: datetime | None) -> set[UUID]: ...

    def lease_release(self, *, key: str, slot: int, job_id: UUID, holder: str) -> None: ...

    def job_release_unheld(self, *, worker_id: str, held: Sequence[UUID], now: datetime | None) -> list[UUID]: ...

    def job_heartbeat(self, *, held: Sequence[tuple[UUID, UUID]], worker_id: str, visibility: float,
                      now: datetime | None) -> set[UUID]: ...

    def job_rescue(self, *, now: datetime | None, names: Sequence[str], no_dead_letter: Sequence[str],
                   limit: int = 500) -> list[tuple]: ...

    def leader_attempt_elect(self, *, name: str, holder: str, ttl: float,
                             now: datetime | None) -> LeaderLease: ...

    def leader_resign(self, *, name: str, holder: str, now: datetime | None) -> bool: ...

    def job_purge_finished(self, *, done_retention: float, dead_retention: float, limit: int,
                           now: datetime | None) -> tuple[int, int]: ...

    def queue_wake(self, *, queues: Sequence[str]) -> None: ...

    def counter_fold(self, *, before: datetime) -> int: ...

    def counter_add(self, *, events: Sequence[tuple[str, str, str]], now: datetime | None) -> None: ...

    def outbox_stage_many(self, *, rows: Sequence[JobRow], now: datetime | None,
                          notify: Sequence[str] = ()) -> None: ...

    def outbox_claim(self, *, relay_id: str, limit: int, lease: float,
                     now: datetime | None) -> list[JobRow]: ...

    def outbox_mark_published(self, *, published: Sequence[tuple[UUID, UUID]], relay_id: str,
                              now: datetime | None) -> set[UUID]: ...

    def outbox_release(self, *, ids: Sequence[UUID], relay_id: str) -> set[UUID]: ...

    def outbox_purge(self, *, retention: float, now: datetime | None, limit: int = 1000) -> int: ...

    # -- durable runs (ultimate_jobs.runtime.steps, .events, .progress) ----------------------------------

    def step_list(self, *, run_id: UUID, now: datetime | None) -> list[StepRow]: ...

    def step_begin(self, *, job_id: UUID, claim: UUID, run_id: UUID, name: str, seq: int, wake_in: float | None,
                   event: str | None, event_match: str | None, now: datetime | None) -> datetime | None: ...

    def step_complete(self, *, job_id: UUID, claim: UUID, run_id: UUID, name: str, seq: int, output: str,
                      count: bool, now: datetime | None) -> str: ...

    def step_fail(self, *, job_id: UUID, claim: UUID, run_id: UUID, name: str, seq: int, error: str, count: bool,
                  now: datetime | None) -> str: ...

    def event_publish(self, *, event_id: UUID, name: str, payload: str, now: datetime | None) -> int: ...

    def event_find(self, *, name: str, match: str | None, since: datetime) -> str | None: ...

    def event_purge(self, *, retention: float, now: datetime | None, limit: int = 1000) -> int: ...

    def job_progress(self, *, job_id: UUID, claim: UUID, progress: str, now: datetime | None) -> bool: ...

    def job_wake_waiter(self, *, job_id: UUID, now: datetime | None) -> bool: ...
