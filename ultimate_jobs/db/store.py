"""Internal: what every store answers, and how the core finds the store for an alias.

The core (enqueue, worker, ops) speaks to a store, never to SQL: ``PostgresStore``
(``db/postgres/``) and ``SqliteStore`` (``db/sqlite/``) implement the same methods, named
``<entity>_<verb>`` with keyword-only arguments, and one conformance suite
(``tests/store_contract/``) calls each of them on both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Literal, LiteralString, NamedTuple, Protocol
from uuid import UUID

if TYPE_CHECKING:
    from ultimate_jobs.db.listen import Listener

# The NOTIFY channels: an enqueue (or a woken wait, an operator's retry) wakes workers; a staged
# outbox row wakes relays only.
JOBS_CHANNEL: LiteralString = "ultimate_jobs"
# The per-attempt history a job keeps (``Job.attempts``): the newest entries, each error cut to this.
ATTEMPTS_KEPT = 50
ATTEMPT_ERROR_CHARS = 4000
OUTBOX_CHANNEL: LiteralString = "ultimate_jobs_outbox"


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
    sensitive: bool = False  # the row's flag: the worker masks by it as by the declaration's (SPEC §10)


class Settlement(NamedTuple):
    """How one attempt ended, as the settle statement writes it. ``state`` is a final state,
    ``retry``, ``ready`` (interrupted: back at once) or ``suspended``; ``uncount`` hands the
    attempt back."""

    id: UUID
    claim: UUID
    state: str
    result: str | None = None
    last_error: str | None = None
    error_code: str | None = None
    stop_reason: str | None = None
    delay: float = 0.0
    uncount: bool = False
    # Seconds the attempt ran: its history entry starts this long before the settle (None: at it).
    elapsed: float | None = None


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
StepWrite = Literal["written", "already-completed", "fenced-out"]
WRITTEN: StepWrite = "written"
ALREADY_COMPLETED: StepWrite = "already-completed"
FENCED_OUT: StepWrite = "fenced-out"


class Inserted(NamedTuple):
    """``job_insert_many``'s answer for one row: the job that holds its key, and whether that is
    an existing live job (``deduped``) rather than the row just inserted."""

    id: UUID
    run_id: UUID
    deduped: bool


class SettledAndClaimed(NamedTuple):
    """``job_settle_and_claim``'s answer: the ids that settled, and the rows claimed per queue."""

    settled: set[UUID]
    claimed: dict[str, list[ClaimedJob]]


class Rescued(NamedTuple):
    """One job ``job_rescue`` handed back, and the state it now has (``ready``, ``dead``, ``failed``)."""

    id: UUID
    name: str
    queue: str
    state: str


class Purged(NamedTuple):
    """What one ``job_purge_finished`` batch deleted."""

    jobs: int
    steps: int


class LeaderLease(NamedTuple):
    """One election's answer. ``now`` is the database's clock (the process clock on SQLite);
    ``expires_at`` is this lease's expiry when ``leading``, else the current holder's."""

    leading: bool
    now: datetime
    expires_at: datetime | None
    holder: str | None
    version: int


class ViewFacts(NamedTuple):
    """What ``view_describe`` knows of a relation: its kind (``"matview"``, ``"table"``, ``"view"``,
    ``"other"``, or None when no relation has the name), whether it has a unique index usable by
    ``REFRESH ... CONCURRENTLY`` (no predicate, no expression), and its schema-qualified name."""

    kind: str | None
    unique_index: bool
    qualified: tuple[str, str] | None


@dataclass(slots=True, kw_only=True)
class JobRow:
    """One validated row, ready for the store: an enqueue, or a staged outbox row being published
    (under the ids it was staged with, ``delay`` 0 and its ``run_at`` fixed at staging).

    Not ``frozen`` though nothing changes one: a frozen dataclass's ``__init__`` pays an
    ``object.__setattr__`` call per field, and ``enqueue_many`` makes one a row (docs/scaling.md)."""

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
    sensitive: bool = False  # the declaration's sensitive=True, stored on the row (SPEC §10)
    dedupe_key: tuple[str, str, str] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        self.dedupe_key = (self.name, self.tenant_id or "", self.idempotency_key)


class Store(Protocol):
    """What every store answers: PostgreSQL (``db/postgres/``) and SQLite (``db/sqlite/``).

    Conventions, true of every method unless its docstring says otherwise:

    - **Arguments** are keyword-only. ``now`` is the caller's clock for the statement:
      ``clock.sql_now()``, which is None in production so PostgreSQL's clock decides (a frozen test
      clock reaches SQL through it); SQLite has no shared clock and uses ``now or clock.now()``.
    - **Transactions: the caller commits.** Each method runs on this thread's Django connection to
      ``alias``: inside ``transaction.atomic()`` it joins the caller's transaction (an enqueue, a
      stage or a publish commits or rolls back with the caller's work); outside one, each statement
      commits on its own (autocommit). A method of several statements (noted below) wraps them in
      one transaction of its own, a savepoint when the caller has one open.
    - **Fencing.** A claimed job is ``running`` under a claim token (``claim``) that every claim
      draws anew. Every write on a claimed job (settle, heartbeat, step, progress) matches only while
      the row is still ``running`` under the token its caller was handed; a job that was cancelled,
      rescued or claimed again answers "no row" (absent from the answer set, None, ``FENCED_OUT`` or
      False), writes nothing, and the caller treats its run as lost (it cancels the body's token
      with ``X_JOB_LEASE_LOST``, logs ``jobs.*.lost`` and settles nothing). Such a write is always
      safe to send again.
    - **SQLite** serialises writers (one at a time, ``transaction_mode=IMMEDIATE``), so it needs no
      ``SKIP LOCKED``: what PostgreSQL does in one statement, it may do in a few inside a
      transaction. It has no ``LISTEN/NOTIFY`` (``supports_listen_notify`` is False; workers poll)
      and no JSON containment (event matches are tested in Python).
    """

    alias: str
    supports_listen_notify: bool
    # The most rows one ``job_insert_many`` call takes: PostgreSQL streams a whole enqueue_many
    # (10,000) in one COPY; SQLite takes 1,000 (one statement's worth of parameters).
    insert_batch_rows: int

    # -- jobs: enqueue, claim, settle ---------------------------------------------------------------

    def job_insert_many(self, *, rows: Sequence[JobRow], now: datetime | None,
                        notify: Sequence[str] = ()) -> list[Inserted]:
        """Insert ``rows`` (validated, distinct dedupe keys) as ``ready``, or ``delayed`` while their
        ``run_at`` (else ``now + delay``) is in the future; answer an ``Inserted`` per row,
        in order.

        Dedupe on the live key: a row whose ``(name, tenant_id or "", idempotency_key)`` is held by
        a job in a live state (``LIVE_STATES``: ready, delayed, running, suspended) is not inserted;
        its answer is the live job's ids with ``deduped`` True. A finished job frees its key. On
        PostgreSQL a key whose holder finishes between the insert and the lookup is inserted on a
        retry. Queues named in ``notify`` get one ``pg_notify`` each at commit (SQLite: ignored).
        """

    def job_claim(self, *, queue: str, names: Sequence[str], limit: int, worker_id: str, visibility: float,
                  now: datetime | None, blocked_tenants: Sequence[str] = ()) -> list[ClaimedJob]:
        """Claim up to ``limit`` runnable jobs of ``queue``: state ready, delayed or suspended with
        ``run_at <= now``, ``name`` in ``names`` (the code this worker has), tenant not in
        ``blocked_tenants``, queue not paused; taken in ``(priority, run_at, id)`` order.

        Each claimed row becomes ``running`` under ``worker_id`` with ``attempt + 1``, a new claim
        token, its lease until ``now + visibility`` seconds and ``started_at`` set on its first
        claim. Concurrent claims never answer the same row (PostgreSQL: ``FOR UPDATE SKIP LOCKED``;
        SQLite: one writer). Empty ``names`` claims nothing. SQLite answers in priority order;
        PostgreSQL in no promised order.
        """

    def job_settle_many(self, *, settlements: Sequence[Settlement], now: datetime | None) -> set[UUID]:
        """Settle finished attempts; answer the ids that settled. Fenced: a settlement whose row is
        no longer ``running`` under its ``claim`` is absent from the answer (the worker logs
        ``jobs.settle.unowned`` and runs nothing that waited for the settle).

        ``retry`` lands ``delayed`` (``delay > 0``) or ``ready``; ``retry``, ``ready`` and
        ``suspended`` are due again at ``now + delay``; a final state (done, failed, dead,
        cancelled) stamps ``finished_at``. ``uncount`` hands the attempt back; None in ``result``,
        ``last_error`` or ``error_code`` keeps the stored value. Each settled row adds one to the
        outcome counters (``retried``, ``interrupted``, or its state) in the same transaction.
        A counted settlement (not ``uncount``) appends one entry to the row's ``attempts``, keeping
        the last ``ATTEMPTS_KEPT``: ``attempt``, ``worker`` (``claimed_by``), ``started_at``
        (``elapsed`` seconds before the settle), ``finished_at``, ``outcome`` (as counted),
        ``error_code`` and ``error`` (``last_error``, its middle cut past ``ATTEMPT_ERROR_CHARS``).
        """

    def job_settle_and_claim(self, *, settlements: Sequence[Settlement], claims: dict[str, int],
                             names: Sequence[str], worker_id: str, visibility: float,
                             now: datetime | None, blocked_tenants: Sequence[str] = (),
                             ) -> SettledAndClaimed:
        """``job_settle_many`` then ``job_claim`` per ``{queue: limit}`` in ``claims``, in one
        transaction of its own (PostgreSQL: pipelined, one round trip and one commit); answer the
        settled ids and the claimed rows per queue. The worker's pass: if it raises, the claim may
        have committed with its answer lost, so the worker calls ``job_release_unheld`` next.
        """

    def job_heartbeat(self, *, held: Sequence[tuple[UUID, UUID]], worker_id: str, visibility: float,
                      now: datetime | None) -> set[UUID]:
        """Extend the lease of each held ``(job_id, claim)`` to ``now + visibility``; answer the ids
        renewed. Fenced on the claim token, ``running`` and ``claimed_by = worker_id``: a job absent
        from the answer was cancelled, rescued or claimed again, and the worker cancels its body
        (``X_JOB_LEASE_LOST``). Several statements in one transaction on SQLite.
        """

    def job_release_unheld(self, *, worker_id: str, held: Sequence[UUID], now: datetime | None) -> list[UUID]:
        """Hand back every job ``running`` under ``worker_id`` whose id is not in ``held`` (a claim
        that committed after its answer was lost): ``ready`` again at once, attempt handed back,
        uncounted (its body never ran). Answer the ids handed back.
        """

    def job_rescue(self, *, now: datetime | None, names: Sequence[str], no_dead_letter: Sequence[str],
                   limit: int = 500) -> list[Rescued]:
        """Hand back up to ``limit`` jobs of ``names`` still ``running`` with a lapsed lease
        (``visible_at < now``: their worker died or stalled); answer ``(id, name, queue, state)``
        per rescued job (``Rescued``).

        A compare-and-set on the claim token read under the lock, so each lapse is rescued once
        (a second rescue finds the row no longer running). Before the last attempt the job is
        ``ready`` again; on it, ``dead`` (or ``failed`` for names in ``no_dead_letter``) with stop
        reason ``lease-lapsed``; always ``error_code`` ``X_LEASE_LAPSED``, counted like a settle.
        The stalled worker's later settle or heartbeat finds the row no longer its own. SQLite:
        several statements in one transaction.
        """

    def job_purge_finished(self, *, done_retention: float, dead_retention: float, limit: int,
                           now: datetime | None) -> Purged:
        """Delete one batch of up to ``limit`` finished jobs past their retention (``done`` after
        ``done_retention`` seconds; ``dead``, ``failed``, ``cancelled`` after ``dead_retention``),
        then the steps of runs left with no job; answer what it deleted (``Purged``). Live jobs are
        never touched. SQLite: several statements in one transaction.
        """

    def job_progress(self, *, job_id: UUID, claim: UUID, progress: str, now: datetime | None) -> bool:
        """Store a run's progress (JSON text); answer whether it landed. Fenced: False when the job
        is no longer running under ``claim``, and the caller cancels the body (``X_JOB_LEASE_LOST``).
        """

    def job_wake_waiter(self, *, job_id: UUID, now: datetime | None) -> bool:
        """After a run settled ``suspended`` on an event wait: make it due now when a matching event
        of the run's own tenant committed while it was suspending (the publish could not wake a row
        still running); answer whether it woke. A compare on ``suspended``, so a re-claimed row is untouched. SQLite:
        several statements in one transaction.
        """

    def queue_wake(self, *, queues: Sequence[str], channel: str = JOBS_CHANNEL) -> None:
        """Wake idle workers (or, on ``OUTBOX_CHANNEL``, relays) of ``queues`` when the current
        transaction commits (an operator retried or promoted jobs there; a wake a ``WAKE_WINDOW``
        withheld). SQLite: nothing to send, workers poll."""

    def listen(self, *, channel: str, on_wake: Callable[[str], None], queues: Iterable[str] = ()) -> Listener | None:
        """Start listening on ``channel`` (``JOBS_CHANNEL`` for workers, ``OUTBOX_CHANNEL`` for relays)
        and answer the running ``Listener``; the caller ``stop()``s it. ``on_wake(queue)`` runs on the
        listener's thread for each notification of one of ``queues`` (all when empty), and with ""
        after each (re-)connect so a poll covers what was sent while nobody listened. The session is
        its own connection, never one of Django's, dialled on the alias ``LISTEN_DATABASES`` names
        for this one; it probes itself every ``WAKE_PROBE_INTERVAL`` (``Listener.verified``, False when
        the last probe went unheard: poll) and sends ``UNLISTEN *`` before it is closed. SQLite
        answers None: nothing to listen to, poll.
        """

    # -- fleet concurrency slots (``concurrency=`` keys) ---------------------------------------------

    def slot_acquire(self, *, key: str, limit: int, job_id: UUID, holder: str, ttl: float,
                      now: datetime | None) -> int | None:
        """Take a free slot (0 to ``limit - 1``) of ``key`` for ``job_id`` until ``now + ttl``;
        answer the slot, or None when all ``limit`` are held. Free: no row, an expired row (its
        worker died), or this job's own leftover, which is preferred. Of two workers racing for one
        slot, one wins (the primary key decides); PostgreSQL tries up to three slots.
        """

    def slot_renew(self, *, held: Sequence[tuple[str, int, UUID]], holder: str, ttl: float,
                    now: datetime | None) -> set[UUID]:
        """Extend each held ``(key, slot, job_id)`` to ``now + ttl``; answer the job ids renewed.
        Fenced on holder, job and a lease not yet expired: a job absent from the answer lost its
        slot (expired, maybe taken), and the worker cancels it (``X_JOB_SLOT_LOST``).
        """

    def slot_release(self, *, key: str, slot: int, job_id: UUID, holder: str) -> None:
        """Hand one slot back. Fenced on holder and job: a slot taken over after it expired is not
        touched."""

    # -- scheduler leader lease ------------------------------------------------------------------------

    def leader_attempt_elect(self, *, name: str, holder: str, ttl: float,
                             now: datetime | None) -> LeaderLease:
        """Take the lease ``name`` for ``holder`` until ``now + ttl`` when it is free or lapsed, or
        renew it when ``holder`` has it: one upsert. A refusal answers ``leading`` False with the
        current holder and its expiry. ``version`` is the row's version (the stores never bump it).
        PostgreSQL decides on the database clock (``LeaderLease.now``), so a skewed process neither
        steals a live lease nor keeps one past expiry; SQLite on the process clock.
        """

    def leader_resign(self, *, name: str, holder: str, now: datetime | None) -> bool:
        """Let the lease lapse now so a standby takes over at once; answer whether ``holder`` held a
        live lease. Fenced on the holder: a lease already taken by another is untouched (False)."""

    # -- outcome counters ----------------------------------------------------------------------------

    def counter_add(self, *, events: Sequence[tuple[str, str, str]], now: datetime | None) -> None:
        """Count each ``(name, queue, outcome)`` event once in its 1-minute bucket and its all-time
        row: what happens outside a settle (an operator's cancel, a worker's lost lease)."""

    def counter_fold(self, *, before: datetime) -> int:
        """Move the 1-minute buckets older than ``before`` into the 5-minute and 1-hour tiers, each
        minute row exactly once even when two folds race; answer the tier rows written."""

    # -- transactional outbox ------------------------------------------------------------------------

    def outbox_stage_many(self, *, rows: Sequence[JobRow], now: datetime | None,
                          notify: Sequence[str] = ()) -> None:
        """Stage ``rows`` in the caller's transaction: its commit is the enqueue, its rollback means
        the jobs never existed. ``run_at`` is fixed here (a delay counts from the enqueue). On
        PostgreSQL the rows are grouped by transaction id, published in ``(staged_at, id)`` order,
        and queues in ``notify`` wake idle relays at commit; on SQLite all rows form one group.
        """

    def outbox_claim(self, *, relay_id: str, limit: int, lease: float,
                     now: datetime | None) -> list[JobRow]:
        """Claim up to ``limit`` committed, unpublished rows for ``relay_id`` for ``lease`` seconds;
        answer them as ``JobRow``s (their staged ids, ``run_at`` fixed) in ``(staged_at, id)``
        order. Claimable: unclaimed or lease lapsed (its relay died), and only while no earlier row
        of its staging transaction is held, so rows of one transaction never overtake each other.
        """

    def outbox_mark_published(self, *, published: Sequence[tuple[UUID, UUID]], relay_id: str,
                              now: datetime | None) -> set[UUID]:
        """Record each ``(outbox_id, job_id)`` as published (``job_id`` differs from the outbox id
        when the row deduplicated into a live job); answer the outbox ids marked. Fenced on
        ``claimed_by = relay_id`` and unpublished (first writer wins): a relay whose answer misses
        rows lost its lease and rolls its publish back.
        """

    def outbox_release(self, *, ids: Sequence[UUID], relay_id: str) -> set[UUID]:
        """Unclaim rows a failed publish stopped, so the next pass retries them; answer the ids
        released. Fenced like the mark: rows another relay holds are untouched."""

    def outbox_purge(self, *, retention: float, now: datetime | None, limit: int = 1000) -> int:
        """Delete up to ``limit`` rows published more than ``retention`` seconds ago, oldest first;
        answer how many. Unpublished rows are never touched."""

    # -- durable runs: steps (``runtime.steps``, ``.compensation``) ----------------------------------

    def step_list(self, *, run_id: UUID, now: datetime | None) -> list[StepRow]:
        """Every step of ``run_id`` in execution order (``seq``, then id): the one read a replay
        starts from. ``remaining`` is the seconds to ``wake_at`` on the store's clock (negative once
        due; None without a ``wake_at``)."""

    def step_begin(self, *, job_id: UUID, claim: UUID, run_id: UUID, name: str, seq: int, wake_in: float | None,
                   event: str | None, event_match: str | None, now: datetime | None) -> datetime | None:
        """Record a step as ``started`` before its body or wait (a once-step, a sleep's wake time
        ``now + wake_in``, an event wait's name and match); answer its ``started_at``. Fenced: None
        when the job is no longer running under ``claim`` or the step row exists already (only a
        run that is not ours meets one), and the caller raises the run's loss.
        """

    def step_complete(self, *, job_id: UUID, claim: UUID, run_id: UUID, name: str, seq: int, output: str,
                      count: bool, now: datetime | None) -> StepWrite:
        """Checkpoint a step's JSON ``output`` (``count``: one more execution); answer ``WRITTEN``;
        ``ALREADY_COMPLETED`` when the step was completed already (never overwritten: the caller
        reads the stored output, which wins); ``FENCED_OUT`` when the job is no longer running
        under ``claim`` (nothing written; the caller raises the run's loss). PostgreSQL holds the
        job row ``FOR KEY SHARE`` until commit, so no rescue or claim slips in between.
        """

    def step_fail(self, *, job_id: UUID, claim: UUID, run_id: UUID, name: str, seq: int, error: str, count: bool,
                  now: datetime | None) -> StepWrite:
        """Record a failed execution of a step (its error text); answers as ``step_complete``: a
        completed step is never marked failed (``ALREADY_COMPLETED``)."""

    # -- durable runs: events (``ultimate_jobs.events``) ---------------------------------------------

    def event_publish(self, *, event_id: UUID, name: str, payload: str, tenant_id: str | None,
                      now: datetime | None) -> int:
        """Store one event of ``tenant_id`` (None: no tenant) in the caller's transaction and make
        due now every ``suspended`` run of that same tenant (a NULL tenant matches only NULL) with
        an open wait on ``name`` begun no later than the publish whose match the JSON ``payload``
        contains (PostgreSQL notifies their queues at commit); answer how many woke. A rolled-back
        publish leaves no event and wakes nobody.
        """

    def event_find(self, *, name: str, match: str | None, since: datetime, tenant_id: str | None) -> str | None:
        """The payload (JSON text) of the first event of ``name`` and of ``tenant_id`` (None: only
        events with no tenant) published at or after ``since`` whose payload contains ``match``
        (JSON text; None matches any); None when there is none."""

    def event_purge(self, *, retention: float, now: datetime | None, limit: int = 1000) -> int:
        """Delete up to ``limit`` events published more than ``retention`` seconds ago that no open
        wait could still be answered by; answer how many."""

    # -- materialized views (``ultimate_jobs.factories.refresh_view``) ---------------------------------

    def view_describe(self, *, name: str) -> ViewFacts:
        """The kind of the relation ``name`` (a table name, optionally ``schema.name``) and whether
        it has a plain unique index. SQLite has no materialized views: it raises
        ``X_JOB_REFRESH_VIEW_INVALID``."""

    def view_refresh(self, *, name: tuple[str, str], concurrently: bool) -> None:
        """``REFRESH MATERIALIZED VIEW [CONCURRENTLY]`` the view ``(schema, name)``, in the caller's
        transaction. SQLite raises ``X_JOB_REFRESH_VIEW_INVALID``."""
