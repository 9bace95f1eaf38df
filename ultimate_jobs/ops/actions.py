"""Internal: the operator's writes on jobs, re-exported by ``ultimate_jobs.ops``.

``retry_job``, ``cancel_job``, ``promote_job`` and ``remove_job`` act on one job; ``requeue_many``,
``promote_many`` and ``remove_many`` on at most ``MAX_BULK`` (1,000) rows a call matching filters,
answering ``{"affected": n, "remaining": m}`` (call again until ``remaining`` is 0); with
``dry_run=True`` they write nothing and answer ``{"affected": 0, "remaining": <rows matching>}``,
the count a confirmation shows before acting. Every write
is one conditional statement on the state it requires, so an operator racing a worker either
wins cleanly or is refused with a code; none of them can start a second concurrent run:

- retry (requeue): finished jobs only (``done``, ``failed``, ``dead``, ``cancelled``) —
  ``X_JOB_NOT_REQUEUEABLE`` for a live one, ``X_JOB_DUPLICATE`` when a live job holds its key;
- cancel: live jobs only — ``X_JOB_NOT_CANCELLABLE``; a running job's worker sees its row
  change at the next heartbeat and cancels the run (its fenced settle can never overwrite it);
- promote (run now): a ``delayed`` job, or a ``ready`` one backing off before a retry —
  ``X_JOB_NOT_PROMOTABLE``;
- remove: anything but ``running`` — ``X_JOB_NOT_REMOVABLE`` (cancel it first).

Every write takes ``by=`` (keyword, default None): who acted, a Django user or a name. It is in
the log line, in a cancelled job's note, and, for a user, in the admin's history (one ``LogEntry``
per job; see ``audit``).

Logged events: ``jobs.ops.retried``, ``jobs.ops.cancelled``, ``jobs.ops.promoted``,
``jobs.ops.removed`` (each with the job id, name and queue, or the filters and count in bulk, and
``by``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any
from uuid import UUID

from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q, Value
from django.db.models.functions import Coalesce

from ultimate_jobs import clock
from ultimate_jobs.db import store_for
from ultimate_jobs.errors import (
    X_JOB_DUPLICATE,
    X_JOB_INPUT_INVALID,
    X_JOB_NOT_CANCELLABLE,
    X_JOB_NOT_FOUND,
    X_JOB_NOT_PROMOTABLE,
    X_JOB_NOT_REMOVABLE,
    X_JOB_NOT_REQUEUEABLE,
    JobsError,
)
from ultimate_jobs.ids import parse_uuid
from ultimate_jobs.models import JobStep, OutboxEntry
from ultimate_jobs.models.jobs import LIVE_STATES, STATES, TERMINAL_STATES
from ultimate_jobs.names import check_text
from ultimate_jobs.ops import audit, routes
from ultimate_jobs.ops.jobs import get_job
from ultimate_jobs.ops.rows import alias, filter_jobs, jobs, write_now
from ultimate_jobs.ops.types import BulkResult, JobDetail, RemovedJob

if TYPE_CHECKING:
    from ultimate_jobs.ops.audit import Actor

log = logging.getLogger("ultimate_jobs")

MAX_BULK = 1_000
MAX_REASON_CHARS = 1_000  # a cancel's reason; X_TEXT_INVALID past it (or holding NUL)
_RUNNING_FIX = "Cancel it (ops.cancel_job / `jobs cancel`); it stops at its next heartbeat, then retry or remove it."


def _missing(key: UUID, staged_code: str) -> JobsError:
    """No job row: ``X_JOB_NOT_FOUND``, or ``staged_code`` when the id is an enqueue staged in the
    outbox that the relay has not published yet (a live job in the making)."""
    if OutboxEntry.objects.using(alias()).filter(id=key, published_at__isnull=True).exists():
        return JobsError(staged_code, f"Job {key} is staged in the outbox and not published yet; it is live.",
                         "Wait for the relay to publish it (jobs_relay, or the worker's relay role), then act.")
    return JobsError(X_JOB_NOT_FOUND, f"No job has the id {key}.")


def _requeue_values() -> dict[str, Any]:
    now = write_now()
    return {"state": "ready", "attempt": 0, "run_at": now, "visible_at": None, "claimed_by": None, "claim": None,
            "result": None, "stop_reason": None, "finished_at": None, "updated_at": now}


@routes.by_job
def retry_job(job_id: str | UUID, from_step: str | None = None, *, by: Actor = None) -> JobDetail:
    """Requeue a finished job with a fresh attempt budget; answer it as ``get_job`` does.

    The run id is kept, so completed durable steps replay from storage; ``from_step`` drops that
    step and every later one (in execution order) in the same transaction, so they run again.
    Raise ``X_JOB_NOT_FOUND`` for an unknown id, ``X_JOB_NOT_REQUEUEABLE`` for a live job (a
    running one would run twice), ``X_JOB_DUPLICATE`` when a live job holds its key,
    ``X_JOB_INPUT_INVALID`` when the run has no step named ``from_step``.
    """
    key = parse_uuid(job_id, subject="job id")
    with transaction.atomic(using=alias()):
        row = (jobs().select_for_update().filter(id=key)
               .values("state", "run_id", "name", "queue", "idempotency_key").first())
        if row is None:
            raise _missing(key, X_JOB_NOT_REQUEUEABLE)
        if row["state"] not in TERMINAL_STATES:
            raise JobsError(X_JOB_NOT_REQUEUEABLE, f"Job {key} is {row['state']}; only a finished job (done, "
                            "failed, dead or cancelled) can be retried.",
                            _RUNNING_FIX if row["state"] == "running" else None)
        if from_step is not None:
            steps = JobStep.objects.using(alias()).filter(run_id=row["run_id"])
            first = steps.filter(name=from_step).values("seq", "id").first()
            if first is None:
                raise JobsError(X_JOB_INPUT_INVALID, f"Job {key} has no step named {from_step!r}.",
                                "Pass a name from the job's step timeline (ops.get_job(id)['steps']).")
            steps.filter(Q(seq__gt=first["seq"]) | Q(seq=first["seq"], id__gte=first["id"])).delete()
        try:
            with transaction.atomic(using=alias()):
                jobs().filter(id=key, state__in=TERMINAL_STATES).update(**_requeue_values())
        except IntegrityError:
            holder = _live_holder(row)
            raise JobsError(X_JOB_DUPLICATE, f"Live job {holder} holds the key {row['idempotency_key']!r} of "
                            f"{row['name']}; retrying {key} would run that work twice.") from None
        store_for(alias()).queue_wake(queues=[row["queue"]])
        audit.record(by, "Retried", [(key, row["name"])], detail=f"from step {from_step}" if from_step else "")
    log.info("jobs.ops.retried job_id=%s name=%s queue=%s from_step=%s by=%s", key, row["name"], row["queue"],
             from_step, audit.who(by))
    return get_job(key)


def _live_holder(row: Mapping[str, Any]) -> str:
    found = (jobs().filter(state__in=LIVE_STATES, name=row["name"], idempotency_key=row["idempotency_key"])
             .values_list("id", flat=True).first())
    return str(found) if found else "?"


@routes.by_job
def cancel_job(job_id: str | UUID, reason: str | None = None, *, by: Actor = None) -> JobDetail:
    """Cancel a live job; answer it as ``get_job`` does.

    A ready, delayed or suspended job never runs again; a running one is cancelled at its
    worker's next heartbeat (the body sees ``ctx.cancelled``), and its settle, fenced on
    ``state = 'running'``, cannot undo the cancel. Raise ``X_JOB_NOT_FOUND``,
    ``X_JOB_NOT_CANCELLABLE`` (the job had already finished) or ``X_TEXT_INVALID`` (a ``reason``
    over 1,000 characters or holding NUL; nothing is written).
    """
    key = parse_uuid(job_id, subject="job id")
    if reason is not None:  # before anything is written: PostgreSQL cannot store NUL in text
        check_text(reason, subject="reason", max_chars=MAX_REASON_CHARS)
    actor = audit.who(by)
    note = f"cancelled by {actor or 'an operator'}" + (f": {reason}" if reason else "")
    with transaction.atomic(using=alias()):
        row = jobs().select_for_update().filter(id=key).values("state", "name", "queue").first()
        if row is None:
            raise _missing(key, X_JOB_NOT_CANCELLABLE)
        now = write_now()
        changed = jobs().filter(id=key, state__in=LIVE_STATES).update(
            state="cancelled", stop_reason="cancelled", last_error=note[:2000], visible_at=None, finished_at=now,
            updated_at=now)
        if not changed:
            raise JobsError(X_JOB_NOT_CANCELLABLE, f"Job {key} already finished ({row['state']}); there is "
                            "nothing to stop.", "Leave it as it ended, or retry it.")
        store_for(alias()).counter_add(events=[(row["name"], row["queue"], "cancelled")], now=clock.sql_now())
        audit.record(by, "Cancelled", [(key, row["name"])], detail=reason or "")
    log.info("jobs.ops.cancelled job_id=%s name=%s queue=%s was=%s by=%s", key, row["name"], row["queue"],
             row["state"], actor)
    return get_job(key)


def _promotable() -> Q:
    return Q(state="delayed") | Q(state="ready", run_at__gt=write_now())


@routes.by_job
def promote_job(job_id: str | UUID, *, by: Actor = None) -> JobDetail:
    """Make a job waiting on its ``run_at`` runnable now; answer it as ``get_job`` does.

    Raise ``X_JOB_NOT_FOUND``, or ``X_JOB_NOT_PROMOTABLE`` when the job is not waiting (it is
    runnable already, running, suspended, or finished: retry a finished one instead).
    """
    key = parse_uuid(job_id, subject="job id")
    with transaction.atomic(using=alias()):
        row = jobs().filter(id=key).values("state", "name", "queue").first()
        if row is None:
            raise _missing(key, X_JOB_NOT_PROMOTABLE)
        now = write_now()
        if not jobs().filter(_promotable(), id=key).update(state="ready", run_at=now, updated_at=now):
            raise JobsError(X_JOB_NOT_PROMOTABLE, f"Job {key} is {row['state']} and not waiting on its run_at.",
                            "Only a delayed job (or one backing off before a retry) can run now; retry a "
                            "finished one.")
        store_for(alias()).queue_wake(queues=[row["queue"]])
        audit.record(by, "Promoted (run now)", [(key, row["name"])])
    log.info("jobs.ops.promoted job_id=%s name=%s queue=%s by=%s", key, row["name"], row["queue"], audit.who(by))
    return get_job(key)


@routes.by_job
def remove_job(job_id: str | UUID, *, by: Actor = None) -> RemovedJob:
    """Delete a job that is not running, with its step records; answer ``{"id", "removed": True}``.

    Raise ``X_JOB_NOT_FOUND``, or ``X_JOB_NOT_REMOVABLE`` for a running job (deleting it would
    let its key enqueue a second concurrent run): cancel it first.
    """
    key = parse_uuid(job_id, subject="job id")
    with transaction.atomic(using=alias()):
        row = jobs().select_for_update().filter(id=key).values("state", "name", "queue", "run_id").first()
        if row is None:
            raise _missing(key, X_JOB_NOT_REMOVABLE)
        deleted, _ = jobs().filter(id=key).exclude(state="running").delete()
        if not deleted:
            raise JobsError(X_JOB_NOT_REMOVABLE, f"Job {key} is running; deleting it would let a second run of "
                            "its key start while this one continues.", _RUNNING_FIX)
        _drop_steps([row["run_id"]])
        audit.record(by, "Removed", [(key, row["name"])], flag=audit.DELETION, detail=f"was {row['state']}")
    log.info("jobs.ops.removed job_id=%s name=%s queue=%s was=%s by=%s", key, row["name"], row["queue"],
             row["state"], audit.who(by))
    return RemovedJob(id=str(key), removed=True)


def _drop_steps(run_ids: Iterable[UUID]) -> None:
    """Delete the step records of runs no job row refers to any more."""
    runs = set(run_ids)
    orphans = runs - set(jobs().of_runs(runs).values_list("run_id", flat=True))
    if orphans:
        JobStep.objects.using(alias()).filter(run_id__in=list(orphans)).delete()


# -- bulk ------------------------------------------------------------------------------------------


def _filtered(*, state: str | None, queue: str | None, name: str | None, tenant_id: str | None,
              ids: Iterable[str | UUID] | None, allowed: tuple[str, ...], verb: str) -> Any:
    if state is None and ids is None:
        raise JobsError(X_JOB_INPUT_INVALID, f"{verb} needs state= or ids=, so one call cannot touch every job.")
    query = filter_jobs(jobs().filter(state__in=allowed), state=state, queue=queue, name=name,
                        tenant_id=tenant_id)
    if ids is not None:
        keys = [parse_uuid(i, subject="ids entry") for i in ids]
        if len(keys) > MAX_BULK:
            raise JobsError(X_JOB_INPUT_INVALID, f"{verb} got {len(keys)} ids, over the {MAX_BULK:,} limit.",
                            f"Pass at most {MAX_BULK:,} ids a call.")
        query = query.filter(id__in=keys)
    return query


@routes.bulk
def requeue_many(*, state: str | None = None, queue: str | None = None, name: str | None = None,
                 tenant_id: str | None = None, ids: Iterable[str | UUID] | None = None,
                 by: Actor = None, dry_run: bool = False) -> BulkResult:
    """Retry up to 1,000 finished jobs matching the filters; answer ``{"affected", "remaining"}``.

    A job whose key a live job holds is skipped and not counted in ``remaining`` (so calling until
    ``remaining`` is 0 ends); of several finished jobs sharing one key, only the oldest moves.
    Raise ``X_JOB_NOT_REQUEUEABLE`` when ``state`` is a live state, ``X_JOB_INPUT_INVALID`` without
    ``state`` or ``ids``.
    """
    if state is not None and state in LIVE_STATES:
        raise JobsError(X_JOB_NOT_REQUEUEABLE, f"state={state!r} is live; only finished jobs can be retried.")
    live = (jobs().filter(state__in=LIVE_STATES, name=OuterRef("name"), idempotency_key=OuterRef("idempotency_key"))
            .annotate(live_tenant=Coalesce("tenant_id", Value(""))).filter(live_tenant=OuterRef("key_tenant")))
    movable = (_filtered(state=state, queue=queue, name=name, tenant_id=tenant_id, ids=ids,
                         allowed=TERMINAL_STATES, verb="requeue_many")
               .annotate(key_tenant=Coalesce("tenant_id", Value(""))).filter(~Exists(live)))
    if dry_run:
        return BulkResult(affected=0, remaining=movable.count())
    picked: dict[tuple[str, str, str], tuple[UUID, str]] = {}
    for job_id, job_name, tenant, key, job_queue in (movable.order_by("id")
                                                     .values_list("id", "name", "key_tenant", "idempotency_key",
                                                                  "queue")[:MAX_BULK]):
        picked.setdefault((job_name, tenant, key), (job_id, job_queue))
    names = {job_id: job_name for (job_name, _, _), (job_id, _) in picked.items()}
    moved: list[UUID] = []
    with transaction.atomic(using=alias()):
        targets = list(names)
        try:
            with transaction.atomic(using=alias()):
                query = jobs().filter(id__in=targets, state__in=TERMINAL_STATES)
                moved = list(query.values_list("id", flat=True))
                affected = query.update(**_requeue_values())
        except IntegrityError:
            # An enqueue took one of the keys meanwhile: move the rest one by one, skipping it.
            moved, affected = [], 0
            for target in targets:
                try:
                    with transaction.atomic(using=alias()):
                        if jobs().filter(id=target, state__in=TERMINAL_STATES).update(**_requeue_values()):
                            moved.append(target)
                            affected += 1
                except IntegrityError:
                    continue
        store_for(alias()).queue_wake(queues=[q for _, q in picked.values()])
        audit.record(by, "Retried (bulk)", [(job_id, names[job_id]) for job_id in moved])
    remaining = movable.count()
    log.info("jobs.ops.retried bulk state=%s queue=%s name=%s tenant=%s affected=%s remaining=%s by=%s", state,
             queue, name, tenant_id, affected, remaining, audit.who(by))
    return BulkResult(affected=affected, remaining=remaining)


@routes.bulk
def promote_many(*, state: str | None = None, queue: str | None = None, name: str | None = None,
                 tenant_id: str | None = None, ids: Iterable[str | UUID] | None = None,
                 by: Actor = None, dry_run: bool = False) -> BulkResult:
    """Make up to 1,000 waiting jobs (delayed, or ready and backing off) runnable now;
    answer ``{"affected", "remaining"}``. Raise ``X_JOB_NOT_PROMOTABLE`` for another ``state``."""
    if state is not None and state not in ("delayed", "ready"):
        raise JobsError(X_JOB_NOT_PROMOTABLE, f"state={state!r}: only delayed jobs (or ready ones backing off) "
                        "wait on their run_at.")
    waiting = _filtered(state=state, queue=queue, name=name, tenant_id=tenant_id, ids=ids,
                        allowed=("delayed", "ready"), verb="promote_many").filter(_promotable())
    if dry_run:
        return BulkResult(affected=0, remaining=waiting.count())
    with transaction.atomic(using=alias()):
        picked = list(waiting.order_by("id").values_list("id", "queue", "name")[:MAX_BULK])
        now = write_now()
        query = jobs().filter(_promotable(), id__in=[p[0] for p in picked])
        moved = set(query.values_list("id", flat=True))
        affected = query.update(state="ready", run_at=now, updated_at=now)
        store_for(alias()).queue_wake(queues=[p[1] for p in picked])
        audit.record(by, "Promoted (bulk)", [(p[0], p[2]) for p in picked if p[0] in moved])
    remaining = waiting.count()
    log.info("jobs.ops.promoted bulk state=%s queue=%s name=%s tenant=%s affected=%s remaining=%s by=%s", state,
             queue, name, tenant_id, affected, remaining, audit.who(by))
    return BulkResult(affected=affected, remaining=remaining)


@routes.bulk
def remove_many(*, state: str | None = None, queue: str | None = None, name: str | None = None,
                tenant_id: str | None = None, ids: Iterable[str | UUID] | None = None,
                by: Actor = None, dry_run: bool = False) -> BulkResult:
    """Delete up to 1,000 jobs matching the filters, never a running one; answer
    ``{"affected", "remaining"}``. Raise ``X_JOB_NOT_REMOVABLE`` for ``state="running"``."""
    if state == "running":
        raise JobsError(X_JOB_NOT_REMOVABLE, "Running jobs cannot be removed: a second run of the key could "
                        "start while they continue.", _RUNNING_FIX)
    removable = _filtered(state=state, queue=queue, name=name, tenant_id=tenant_id, ids=ids,
                          allowed=tuple(s for s in STATES if s != "running"), verb="remove_many")
    if dry_run:
        return BulkResult(affected=0, remaining=removable.count())
    with transaction.atomic(using=alias()):
        picked = list(removable.order_by("id").values_list("id", "run_id", "name")[:MAX_BULK])
        query = jobs().filter(id__in=[p[0] for p in picked]).exclude(state="running")
        gone = set(query.values_list("id", flat=True))
        affected, _ = query.delete()
        _drop_steps(p[1] for p in picked)
        audit.record(by, "Removed (bulk)", [(p[0], p[2]) for p in picked if p[0] in gone], flag=audit.DELETION)
    remaining = removable.count()
    log.info("jobs.ops.removed bulk state=%s queue=%s name=%s tenant=%s affected=%s remaining=%s by=%s", state,
             queue, name, tenant_id, affected, remaining, audit.who(by))
    return BulkResult(affected=affected, remaining=remaining)
