"""Internal: the operator's view of queues and workers, re-exported by ``ultimate_jobs.ops``.

``pause_queue`` / ``resume_queue`` / ``paused_queues`` (a paused queue is skipped by the claim
statement itself, fleet-wide, within one poll; enqueues still land), ``queue_stats()`` (per
queue, every row in exactly one bucket), ``workers()`` (``WorkerHeartbeat`` rows, alive or presumed dead),
``backfill_runs()`` (the backfill ledger) and ``scheduled_tasks()`` (one row per task, read through
``ops.schedule``).

Logged events: ``jobs.queue.paused``, ``jobs.queue.resumed``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from django.db.models import BooleanField, Case, Count, DateTimeField, F, Min, Q, QuerySet, Value, When
from django.db.models.functions import Now

from ultimate_jobs import clock
from ultimate_jobs.conf import get_settings
from ultimate_jobs.errors import X_JOB_INPUT_INVALID, JobsError
from ultimate_jobs.jsoncodec import iso, plain
from ultimate_jobs.models import BackfillRun, Job, OutboxEntry, QueuePause, WorkerHeartbeat
from ultimate_jobs.models.backfills import STATUSES
from ultimate_jobs.models.jobs import TERMINAL_STATES
from ultimate_jobs.names import check_queue_name
from ultimate_jobs.ops import audit, routes
from ultimate_jobs.ops.rows import alias, jobs, write_now
from ultimate_jobs.ops.schedule import next_task_run, task_fires
from ultimate_jobs.ops.types import (
    BackfillRunInfo,
    PausedQueue,
    QueuePaused,
    QueueResumed,
    QueueStats,
    ScheduledTask,
    WorkerInfo,
)
from ultimate_jobs.redact import redact_text
from ultimate_jobs.registry import registered_jobs
from ultimate_jobs.runtime.presence import EXPIRED_KEPT

if TYPE_CHECKING:
    from ultimate_jobs.ops.audit import Actor

log = logging.getLogger("ultimate_jobs")

BUCKETS = ("ready", "delayed", "running", "suspended", "done", "failed", "dead", "cancelled")


@routes.by_queue
def pause_queue(queue: str, *, by: Actor = None) -> QueuePaused:
    """Stop every worker claiming from ``queue`` (within one poll); enqueues still land.

    Pausing a paused queue keeps the first pause. Answer ``{"queue", "paused", "paused_at",
    "paused_by"}``; raise ``X_QUEUE_INVALID`` for a malformed name. ``by``: who (a user or a name).
    """
    check_queue_name(queue)
    QueuePause.objects.using(alias()).bulk_create(
        [QueuePause(queue=queue, paused_at=clock.now(), paused_by=audit.who(by))], ignore_conflicts=True)
    audit.record(by, "Paused", [(queue, f"queue {queue}")], model=QueuePause)
    log.info("jobs.queue.paused queue=%s by=%s", queue, audit.who(by))
    row = QueuePause.objects.using(alias()).filter(queue=queue).values("queue", "paused_at", "paused_by").get()
    return QueuePaused(queue=row["queue"], paused_at=iso(row["paused_at"]), paused_by=row["paused_by"], paused=True)


@routes.by_queue
def resume_queue(queue: str, *, by: Actor = None) -> QueueResumed:
    """Let workers claim from ``queue`` again; answer ``{"queue", "paused": False, "was_paused"}``."""
    check_queue_name(queue)
    deleted, _ = QueuePause.objects.using(alias()).filter(queue=queue).delete()
    if deleted:
        audit.record(by, "Resumed", [(queue, f"queue {queue}")], model=QueuePause)
    log.info("jobs.queue.resumed queue=%s was_paused=%s by=%s", queue, bool(deleted), audit.who(by))
    return {"queue": queue, "paused": False, "was_paused": bool(deleted)}


@routes.each_database(routes.concatenated)
def paused_queues() -> list[PausedQueue]:
    """Every paused queue, by name: ``[{"queue", "paused_at", "paused_by"}]``."""
    rows = QueuePause.objects.using(alias()).order_by("queue").values("queue", "paused_at", "paused_by")
    return [PausedQueue(queue=row["queue"], paused_at=iso(row["paused_at"]), paused_by=row["paused_by"])
            for row in rows]


@routes.each_database(routes.merged_stats)
def queue_stats() -> list[QueueStats]:
    """Per queue, sorted by name: a count per bucket and the oldest ready job's age.

    Buckets: ``staged`` (enqueued inside a transaction that committed, waiting in the outbox for
    the relay to publish it), ``ready`` (runnable now: state ready, or delayed whose ``run_at`` has passed),
    ``delayed`` (waiting on a future ``run_at``), ``running``, ``suspended``, ``done``,
    ``failed``, ``dead``, ``cancelled``; every row is in exactly one, so they add up to
    ``total``. ``oldest_ready_age`` is seconds since the oldest ready job became runnable (None
    when nothing is ready). Queues that have no rows but are configured, declared or paused are
    listed with zeros, so a gauge reads 0 instead of vanishing. Two queries: the jobs counted from indexes a
    fresh job's insert already writes or that only rarer rows enter (``_grouped``), the staged rows from
    the relay's claim index.
    """
    grouped = _grouped(write_now())
    paused = {row["queue"] for row in paused_queues()}
    names = set(get_settings().QUEUES) | {h.queue for h in registered_jobs()} | paused
    stats: dict[str, dict[str, Any]] = {q: _empty(q) for q in names}
    oldest: dict[str, datetime] = {}
    for row in grouped:
        entry = stats.setdefault(row["queue"], _empty(row["queue"]))
        state = row["bucket"]
        entry["total"] += row["n"]
        if state == "delayed":
            entry["ready"] += row["due"]
            entry["delayed"] += row["n"] - row["due"]
        else:
            entry[state] = entry.get(state, 0) + row["n"]
        if row["oldest"] is not None and (row["queue"] not in oldest or row["oldest"] < oldest[row["queue"]]):
            oldest[row["queue"]] = row["oldest"]
    for queue, count in _staged_counts().items():
        entry = stats.setdefault(queue, _empty(queue))
        entry["staged"] += count
        entry["total"] += count
    reading = clock.now()
    for queue, entry in stats.items():
        entry["paused"] = queue in paused
        if queue in oldest:
            entry["oldest_ready_at"] = plain(oldest[queue])
            entry["oldest_ready_age"] = max(0.0, round((reading - oldest[queue]).total_seconds(), 3))
    return [cast(QueueStats, stats[q]) for q in sorted(stats)]


def _staged_counts() -> dict[str, int]:
    """Unpublished outbox rows per queue (the relay's claim index holds exactly these)."""
    rows = (OutboxEntry.objects.using(alias()).filter(published_at__isnull=True).values("queue").order_by()
            .annotate(n=Count("id")))
    return {row["queue"]: row["n"] for row in rows}


def _grouped(now: datetime | Now) -> QuerySet[Job, Any]:
    """Rows per queue and state, with how many of them are due and the oldest due ``run_at``.

    Each part names one partial index's predicate (there is no whole-table ``(state, queue)``
    index since 0013_write_path), so the live parts walk indexes that hold live rows only and cost
    nothing per finished row: ready rows from the claim's ready index (index-only: queue, run_at
    and id are in it), delayed and suspended rows from the due index, running rows from the lease
    index. The finished part counts finished rows from the finished index, or from the table when
    nearly every row is finished (the planner's choice): exact, and as dear as before 0013.
    """
    def counts(due: Q) -> dict[str, Any]:
        return {"n": Count("id"), "due": Count("id", filter=due), "oldest": Min("run_at", filter=due)}

    none = {"n": Count("id"), "due": Value(0), "oldest": Value(None, output_field=DateTimeField())}
    ready = (jobs().filter(state="ready").values("queue", bucket=Value("ready")).order_by()
             .annotate(**counts(Q(run_at__lte=now))))
    waiting = (jobs().filter(state__in=("delayed", "suspended")).values("queue", bucket=F("state")).order_by()
               .annotate(**counts(Q(state="delayed", run_at__lte=now))))
    running = jobs().filter(state="running").values("queue", bucket=Value("running")).order_by().annotate(**none)
    finished = (jobs().filter(state__in=TERMINAL_STATES).values("queue", bucket=F("state")).order_by()
                .annotate(**none))
    return ready.union(waiting, running, finished, all=True)


def _empty(queue: str) -> dict[str, Any]:
    return {"queue": queue, "staged": 0, **{b: 0 for b in BUCKETS}, "total": 0, "oldest_ready_at": None,
            "oldest_ready_age": None, "paused": False}


@routes.each_database(routes.concatenated)
def workers() -> list[WorkerInfo]:
    """Workers by id: ``[{"id", "host", "pid", "queues", "slots", "in_flight", "in_flight_count",
    "started_at", "last_heartbeat_at", "last_heartbeat_age", "expires_at", "status"}]``.

    ``status`` is ``"alive"`` while the last heartbeat is within the worker's visibility timeout
    (its row's ``expires_at``, on the database's clock), else ``"presumed-dead"``: a worker killed
    with SIGKILL (or cut off) never deletes its row, so it is listed as presumed dead — its held
    jobs are rescued once their leases lapse — until its row is swept an hour later. A worker that
    stopped cleanly deleted its row and is not listed. ``last_heartbeat_age`` is in seconds.
    """
    now = write_now()
    rows = (WorkerHeartbeat.objects.using(alias()).filter(expires_at__gt=clock.now() - EXPIRED_KEPT)
            .annotate(alive=Case(When(expires_at__gt=now, then=Value(True)), default=Value(False),
                                 output_field=BooleanField()))
            .order_by("id").values("id", "host", "pid", "queues", "slots", "in_flight", "started_at",
                                   "last_heartbeat_at", "expires_at", "alive"))
    reading = clock.now()
    answer = []
    for row in rows:
        answer.append(cast(WorkerInfo, {
            **{k: plain(v) for k, v in row.items() if k != "alive"}, "in_flight_count": len(row["in_flight"] or []),
            "last_heartbeat_age": max(0.0, round((reading - row["last_heartbeat_at"]).total_seconds(), 3)),
            "status": "alive" if row["alive"] else "presumed-dead"}))
    return answer


def scheduled_tasks() -> list[ScheduledTask]:
    """Each scheduled task with its next run, last fire and paused flag, by name. Read through
    ``task_fires`` and ``next_task_run``, so a page and the scheduler cannot disagree."""
    now = clock.now()
    rows = []
    for fire in task_fires():
        # Read by the TaskFire keys, typed: a misspelt key is a mypy error, not a silent "never".
        rows.append(ScheduledTask(task=fire["name"], next_run=iso(next_task_run(fire["name"], now)),
                                  last_fire=fire["last_fired_at"], last_occurrence=fire["last_occurrence"],
                                  paused=fire["paused"]))
    return rows


def backfill_runs(limit: int = 100, *, name: str | None = None, status: str | None = None) -> list[BackfillRunInfo]:
    """The backfill ledger (``BackfillRun``), newest pass first, every column JSON-ready; narrowed
    to one backfill ``name`` and/or a ``status`` (running, completed, failed)."""
    if status is not None and status not in STATUSES:
        raise JobsError(X_JOB_INPUT_INVALID, f"status={status!r} is not one of {', '.join(STATUSES)}.")
    rows = BackfillRun.objects.using(alias()).order_by("-started_at", "-run_id")
    if name is not None:
        rows = rows.filter(name=name)
    if status is not None:
        rows = rows.filter(status=status)
    return [ledger_row(row) for row in rows.values()[: max(1, min(int(limit), 1000))]]


def ledger_row(values: Mapping[str, Any]) -> BackfillRunInfo:
    """A ``BackfillRun`` row as ``ops`` answers it: JSON-ready, its error through the redactor."""
    return cast(BackfillRunInfo, {k: redact_text(v) if k == "last_error" else plain(v) for k, v in values.items()})
