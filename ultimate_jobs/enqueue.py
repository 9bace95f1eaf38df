"""Internal: the one enqueue path, below the declaration.

Every enqueue (the handle, ``using(...)``, ``enqueue_many``, a scheduled task's occurrence, the
outbox relay) ends in ``submit()``, and its input travels one way: the declaration renders each
input into a ``JobInput`` (the JSON, the idempotency key, the tenant, the concurrency key:
``JobHandle.render``), ``EnqueueOptions.row`` adds the per-call options and builds the
``JobRow``, and ``submit()`` writes it. Nothing here reads a declaration.

All validation happens first, so a refused call writes nothing. Then ``submit()`` decides: inside
a transaction on the jobs database the rows are staged in the outbox on the caller's connection
(its commit is the enqueue, its rollback means the job never existed); in autocommit they go
straight into the job table, unless ``OUTBOX="required"`` refuses that (``X_OUTBOX_NO_TX``). The
relay and the scheduler pass ``direct=True``: they write jobs inside their own transactions (a
publish, a watermark), never a caller's. Staged, one statement per 1,000 rows; inserted, as the store
writes a batch (PostgreSQL: one INSERT per 1,000 rows, or one COPY of up to 10,000).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from django.db import connections
from django.utils.module_loading import import_string

from ultimate_jobs import clock
from ultimate_jobs.conf import get_settings
from ultimate_jobs.context import refuse_if_cancelled
from ultimate_jobs.db import JOBS_CHANNEL, OUTBOX_CHANNEL, Store, store_for
from ultimate_jobs.db.routing import alias_for_queue, check_route
from ultimate_jobs.db.store import Inserted, JobRow
from ultimate_jobs.db.wake import WAKES
from ultimate_jobs.durations import to_seconds
from ultimate_jobs.errors import (
    X_CONFIG_INVALID,
    X_JOB_INPUT_INVALID,
    X_JOB_TENANT_MISMATCH,
    X_OUTBOX_NO_TX,
    JobsError,
)
from ultimate_jobs.ids import parse_uuid, uuid7
from ultimate_jobs.names import check_queue_name
from ultimate_jobs.tracing import current_traceparent

log = logging.getLogger("ultimate_jobs")

MAX_ENQUEUE_BATCH = 10_000
MAX_KEY_CHARS = 1000
STATEMENT_ROWS = 1_000


@dataclass(frozen=True, slots=True)
class EnqueueResult:
    """What an enqueue answers: the job's ids, whether it deduped into a live job, whether it was staged.

    A staged enqueue answers ``deduped=None``: dedupe is decided when the relay publishes it, and
    the outbox row records which job it became (``ops.get_job(id)`` follows it there).
    """

    id: UUID
    run_id: UUID
    deduped: bool | None
    staged: bool


@dataclass(slots=True, kw_only=True)
class JobInput:
    """One input as its declaration renders it: all a row takes from the job and its input.

    ``queue`` and ``priority`` are the declaration's defaults (per-call options override them);
    ``tenant_id`` is the tenant the input acts under (None for a ``NO_TENANT`` job). Not
    ``frozen``, as ``JobRow`` is not: one is made per enqueued row.
    """

    name: str
    queue: str
    priority: int
    max_attempts: int
    payload: str
    idempotency_key: str
    tenant_id: str | None
    concurrency_key: str | None
    sensitive: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class EnqueueOptions:
    """Per-call options (``handle.using(...)``), validated; ``row()`` applies them to one input."""

    delay: float = 0.0
    run_at: datetime | None = None
    queue: str | None = None
    priority: int | None = None
    tenant_id: str | None = None
    run_id: UUID | None = None
    enqueued_by: str | None = None
    enqueuer_tenant: str | None = None
    database: str | None = None
    # Prepended to the job's own key. The scheduler scopes a key to one occurrence with it
    # ("<task>:<occurrence ms>:"), so the same job fired by two ticks is two runs.
    key_prefix: str = ""

    @classmethod
    def build(cls, *, delay: object = None, run_at: object = None, queue: str | None = None,
              priority: int | None = None, tenant_id: str | None = None, run_id: object = None,
              enqueued_by: object = None, database: str | None = None) -> EnqueueOptions:
        """Validate ``using()``'s arguments; raise ``X_JOB_INPUT_INVALID`` (or ``X_QUEUE_INVALID``,
        ``X_ID_INVALID``, ``X_CONFIG_INVALID`` for an unimportable ``TENANT_OF``)."""
        if (delay is None and run_at is None and queue is None and priority is None and tenant_id is None
                and run_id is None and enqueued_by is None and database is None):
            return _NO_OPTIONS  # a plain enqueue() asks for these on every call: nothing to check
        if delay is not None and run_at is not None:
            raise JobsError(X_JOB_INPUT_INVALID, "using() takes delay= or run_at=, not both.")
        delay_s = 0.0 if delay is None else to_seconds(delay, subject="delay", positive=False,
                                                       code=X_JOB_INPUT_INVALID)
        if run_at is not None and (not isinstance(run_at, datetime) or run_at.tzinfo is None):
            raise JobsError(X_JOB_INPUT_INVALID, f"run_at={run_at!r} must be an aware datetime.",
                            "Pass django.utils.timezone.now() + timedelta(...), never a naive datetime.")
        if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
            raise JobsError(X_JOB_INPUT_INVALID, f"priority={priority!r} must be an int.")
        if tenant_id is not None and (not isinstance(tenant_id, str) or not tenant_id or len(tenant_id) > 200
                                      or "\x00" in tenant_id):
            raise JobsError(X_JOB_INPUT_INVALID, f"tenant_id={tenant_id!r:.80} must be a non-empty string of at most "
                            "200 characters without NUL.")
        if database is not None and database not in connections.settings:
            raise JobsError(X_JOB_INPUT_INVALID, f"database={database!r} is not in DATABASES.")
        enqueuer_tenant = None
        by: str | None = None
        if enqueued_by is not None:
            by = str(getattr(enqueued_by, "pk", None) or enqueued_by)[:200]
            if "\x00" in by:  # PostgreSQL cannot store NUL in text: refused here, not by the database
                raise JobsError(X_JOB_INPUT_INVALID, f"enqueued_by={by!r:.80} holds a NUL character.")
            tenant_of = get_settings().TENANT_OF
            if tenant_of:
                try:
                    resolver = import_string(tenant_of)
                except ImportError as exc:
                    raise JobsError(X_CONFIG_INVALID, f"ULTIMATE_JOBS['TENANT_OF']={tenant_of!r} cannot be "
                                    f"imported: {exc}.") from None
                enqueuer_tenant = _tenant_answer(tenant_of, resolver(enqueued_by))
        return cls(delay=delay_s, run_at=run_at, queue=None if queue is None else check_queue_name(queue),
                   priority=priority, tenant_id=tenant_id,
                   run_id=None if run_id is None else parse_uuid(run_id, subject="run_id"),
                   enqueued_by=by, enqueuer_tenant=enqueuer_tenant, database=database)

    def row(self, job: JobInput) -> JobRow:
        """The row for one rendered input under these options; raise ``X_JOB_INPUT_INVALID`` for a
        prefixed key over ``MAX_KEY_CHARS``, ``X_JOB_TENANT_MISMATCH`` for a tenant that disagrees."""
        key = job.idempotency_key
        if self.key_prefix:
            key = self.key_prefix + key
            if len(key) > MAX_KEY_CHARS:
                raise JobsError(X_JOB_INPUT_INVALID, f"{job.name}: the idempotency key with its prefix "
                                f"{self.key_prefix!r} is over {MAX_KEY_CHARS} characters.",
                                "Key jobs by ids, and keep task names short.")
        claimed = self.tenant_id if self.tenant_id is not None else self.enqueuer_tenant
        if self.tenant_id is not None and self.enqueuer_tenant is not None and self.tenant_id != self.enqueuer_tenant:
            raise JobsError(X_JOB_TENANT_MISMATCH, f"{job.name}: tenant_id={self.tenant_id!r} differs from "
                            f"the enqueuer's tenant {self.enqueuer_tenant!r}.")
        if job.tenant_id is not None and claimed is not None and claimed != job.tenant_id:
            raise JobsError(X_JOB_TENANT_MISMATCH, f"{job.name}: the enqueue names tenant {claimed!r} but the "
                            f"input belongs to {job.tenant_id!r}.")
        # A run's first job carries its own id as its run id: it is found by the primary key, and
        # only a job that joins another run enters the run-member index (0013_write_path).
        job_id = uuid7()
        return JobRow(id=job_id, run_id=self.run_id or job_id, name=job.name,
                      queue=job.queue if self.queue is None else self.queue,
                      priority=job.priority if self.priority is None else self.priority, payload=job.payload,
                      idempotency_key=key, tenant_id=claimed if claimed is not None else job.tenant_id,
                      enqueued_by=self.enqueued_by, max_attempts=job.max_attempts, delay=self.delay,
                      run_at=self.run_at, concurrency_key=job.concurrency_key, traceparent=current_traceparent(),
                      sensitive=job.sensitive)


_NO_OPTIONS = EnqueueOptions()


def _tenant_answer(path: str, found: object) -> str | None:
    """``TENANT_OF``'s answer as a tenant id: None, an int or a UUID (a key, as a string), or 1-200
    characters without NUL; anything else is the setting's fault (``X_CONFIG_INVALID``)."""
    if found is None:
        return None
    if isinstance(found, int | UUID) and not isinstance(found, bool):
        return str(found)
    if not isinstance(found, str) or not 1 <= len(found) <= 200 or "\x00" in found:
        raise JobsError(X_CONFIG_INVALID, f"ULTIMATE_JOBS['TENANT_OF']={path!r} answered {found!r:.80}, which is "
                        "not a tenant id.", "Return the user's tenant id (a string of 1-200 characters without "
                        "NUL, an int or a UUID), or None for a user of no tenant.")
    return found


def submit(rows: list[JobRow], *, database: str | None = None, direct: bool = False,
           stage_routed: bool = False) -> list[EnqueueResult]:
    """Write validated rows: one result per row, in order; in-batch duplicates share one job.

    Inside a transaction on the jobs database the rows are staged in the outbox (``staged=True``,
    ``deduped=None``); outside one they are inserted, unless ``OUTBOX="required"``, which raises
    ``X_OUTBOX_NO_TX``. ``direct=True`` inserts even inside a transaction: the relay publishing
    staged rows in its own transaction.

    A queue routed by ``QUEUE_DATABASES`` is written on its alias (``db.routing``); inside a
    transaction on ``database`` (the caller's database) its rows are staged there, in the caller's
    transaction, and the relay delivers them into the routed alias. ``stage_routed=True`` stages
    them so even with ``direct``: the scheduler's occurrence and its watermark commit together.
    Inside a job body whose run was cancelled, raise ``JobCancelled`` with the cancel's code.
    """
    refuse_if_cancelled("enqueue")
    conf = get_settings()
    home = database or conf.DATABASE
    if conf.QUEUE_DATABASES:  # the common case (no route) reads nothing per row
        targets = [alias_for_queue(row.queue, home=home) for row in rows]
        if any(target != home for target in targets):
            return _submit_routed(rows, targets, home=home, direct=direct, stage_routed=stage_routed)
    return _submit_on(rows, store_for(home), direct=direct)


def _submit_routed(rows: list[JobRow], targets: list[str], *, home: str, direct: bool,
                   stage_routed: bool) -> list[EnqueueResult]:
    """``submit`` for rows of routed queues: each alias's rows written as one call, answers in order.
    Inside a transaction on the caller's database a routed row is staged there, never inserted on
    its alias: the outbox guarantee holds only where the caller's transaction is."""
    results: list[EnqueueResult | None] = [None] * len(rows)
    for row, target in zip(rows, targets, strict=True):
        if target != home:
            check_route(row.queue, target)  # a bad route refuses before anything is written
    for target in dict.fromkeys(targets):
        picked = [i for i, t in enumerate(targets) if t == target]
        wrapper = connections[home]
        in_caller_tx = wrapper.in_atomic_block or not wrapper.get_autocommit()
        stage_home = target != home and in_caller_tx and (not direct or stage_routed)
        store = store_for(home if stage_home else target)
        written = _submit_on([rows[i] for i in picked], store, direct=direct and not stage_home)
        for index, result in zip(picked, written, strict=True):
            results[index] = result
    return [r for r in results if r is not None]


def _submit_on(rows: list[JobRow], store: Store, *, direct: bool) -> list[EnqueueResult]:
    """Write ``rows`` on ``store``: staged inside a transaction on it, else inserted."""
    first: dict[tuple[str, str, str], int] = {}
    unique: list[JobRow] = []
    for index, row in enumerate(rows):
        if row.dedupe_key not in first:
            first[row.dedupe_key] = index
            unique.append(row)
    if not direct:
        wrapper = connections[store.alias]
        if wrapper.in_atomic_block or not wrapper.get_autocommit():
            return _stage(store, rows, unique, first)
        if get_settings().OUTBOX == "required":
            raise JobsError(X_OUTBOX_NO_TX, f"{rows[0].name}: enqueue outside a transaction on database "
                            f"{store.alias!r} while ULTIMATE_JOBS['OUTBOX'] is \"required\".")
    written: dict[tuple[str, str, str], Inserted] = {}
    for start in range(0, len(unique), store.insert_batch_rows):
        chunk = unique[start:start + store.insert_batch_rows]
        wake, later = _wake_due(store, chunk, JOBS_CHANNEL)
        answers = store.job_insert_many(rows=chunk, now=clock.sql_now(), notify=wake)
        WAKES.owe(store.alias, JOBS_CHANNEL, later, get_settings().WAKE_WINDOW)
        for row, answer in zip(chunk, answers, strict=True):
            written[row.dedupe_key] = answer
    results = []
    for index, row in enumerate(rows):
        answer = written[row.dedupe_key]
        results.append(EnqueueResult(id=answer.id, run_id=answer.run_id,
                                     deduped=answer.deduped or first[row.dedupe_key] != index,
                                     staged=False))
    return results


def _stage(store: Store, rows: list[JobRow], unique: list[JobRow],
           first: dict[tuple[str, str, str], int]) -> list[EnqueueResult]:
    """Stage ``unique`` in the caller's transaction, one statement per 1,000; answer the staged ids.

    Inputs sharing a key in one call share one staged row, as they would share one job.
    """
    for start in range(0, len(unique), STATEMENT_ROWS):
        chunk = unique[start:start + STATEMENT_ROWS]
        wake, later = _wake_due(store, chunk, OUTBOX_CHANNEL)
        store.outbox_stage_many(rows=chunk, now=clock.sql_now(), notify=wake)
        WAKES.owe(store.alias, OUTBOX_CHANNEL, later, get_settings().WAKE_WINDOW)
    results = []
    for row in rows:
        staged = rows[first[row.dedupe_key]]
        results.append(EnqueueResult(id=staged.id, run_id=staged.run_id, deduped=None, staged=True))
    return results


def _wake_due(store: Store, rows: list[JobRow], channel: str) -> tuple[list[str], list[str]]:
    """Queues whose idle workers (``JOBS_CHANNEL``) or relays (``OUTBOX_CHANNEL``) this write wakes
    at its commit, and those it owes a wake: each queue at most once per ``WAKE_WINDOW``; a wake the
    window withholds is sent when it ends (``db.wake``). A wake whose transaction rolls back is lost
    with it; the poll covers that.
    """
    return WAKES.due(store.alias, channel, {row.queue for row in rows}, get_settings().WAKE_WINDOW)
