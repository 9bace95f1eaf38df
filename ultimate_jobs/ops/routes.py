"""Internal: the operator API over every jobs database (``QUEUE_DATABASES``).

Each ``ops`` function reads and writes the alias ``rows.alias()`` answers; the public ones are
decorated where they are defined with one of the wrappers here, so they follow the route
wherever they are imported from:

- a call about one job (``get_job``, ``retry_job``, ``cancel_job``, ...) runs on the database
  holding that job id (``DATABASE`` first, then each routed alias); ``resolve_job_id`` (a prefix
  or short form) answers from the first database with a match, ``matching_job_ids`` from all;
- a call naming a ``queue`` runs on that queue's alias; a bulk write without one runs on each
  database and answers the sums;
- ``list_jobs`` without a queue merges the databases' keyset pages by id (ids are time-ordered
  UUIDv7), so the cursors page across them;
- ``queue_stats``, ``paused_queues``, ``workers``, ``counters`` and ``counter_totals`` (and so the
  Prometheus metrics) answer every database's rows together;
  ``doctor`` runs its checks on each database (a routed alias's checks are named ``<check>@<alias>``).

With no route configured every wrapper calls straight through, and so does a wrapped call made
inside another one (``rows.pinned()``: ``retry_job`` answering ``get_job``, ``queue_stats``
reading ``paused_queues``), which already runs on the database its caller chose.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, TypeVar, cast
from uuid import UUID

from ultimate_jobs.conf import get_settings
from ultimate_jobs.db.routing import alias_for_queue, aliases
from ultimate_jobs.errors import X_JOB_NOT_FOUND, JobsError
from ultimate_jobs.ids import parse_uuid
from ultimate_jobs.models import Job, OutboxEntry
from ultimate_jobs.ops.rows import on_database, pinned
from ultimate_jobs.ops.types import (
    BulkResult,
    CounterBucket,
    Counters,
    CounterTotal,
    DoctorReport,
    JobPage,
    QueueStats,
)

F = TypeVar("F", bound=Callable[..., Any])
_SUMMED = ("staged", "ready", "delayed", "running", "suspended", "done", "failed", "dead", "cancelled", "total")


def _routed() -> bool:
    """Whether a wrapped call chooses its database: a route is configured and no caller chose one."""
    return bool(get_settings().QUEUE_DATABASES) and not pinned()


def job_alias(job_id: str | UUID) -> str:
    """The database holding ``job_id`` (as a job or a staged outbox row); ``DATABASE`` when none
    does, so the unknown id gets the usual ``X_JOB_NOT_FOUND`` there."""
    key = parse_uuid(job_id, subject="job id")
    for alias in aliases():
        if (Job.objects.using(alias).filter(id=key).exists()
                or OutboxEntry.objects.using(alias).filter(id=key).exists()):
            return alias
    return get_settings().DATABASE


def on_job_database(job_id: str | UUID) -> AbstractContextManager[None]:
    """Read the rows beside a job (its earlier runs, its steps) on the database holding it."""
    return on_database(job_alias(job_id)) if _routed() else nullcontext()


def first_found(fn: F) -> F:
    """``fn(text)`` on each database until one answers; ``X_JOB_NOT_FOUND`` only when none does."""
    @functools.wraps(fn)
    def routed(text: str, *args: Any, **kwargs: Any) -> Any:
        if not _routed():
            return fn(text, *args, **kwargs)
        *others, last = aliases()
        for alias in others:
            with on_database(alias):
                try:
                    return fn(text, *args, **kwargs)
                except JobsError as err:
                    if err.code != X_JOB_NOT_FOUND:
                        raise
        with on_database(last):  # the last database's answer, X_JOB_NOT_FOUND included
            return fn(text, *args, **kwargs)
    return cast(F, routed)


def _on_alias_of(alias_of: Callable[[Any], str | None]) -> Callable[[F], F]:
    """A wrapper running ``fn(first, ...)`` on the database ``alias_of(first)`` names (as called
    when it names none)."""
    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def routed(first: Any, *args: Any, **kwargs: Any) -> Any:
            alias = alias_of(first) if _routed() else None
            if alias is None:
                return fn(first, *args, **kwargs)
            with on_database(alias):
                return fn(first, *args, **kwargs)
        return cast(F, routed)
    return wrap


# ``fn(job_id, ...)`` on the database holding the job; ``fn(queue, ...)`` on the queue's database.
by_job = _on_alias_of(job_alias)
by_queue = _on_alias_of(lambda queue: alias_for_queue(queue) if isinstance(queue, str) else None)


def bulk(fn: F) -> F:
    """A bulk write: on the ``queue=``'s database, or on each database with the answers summed."""
    @functools.wraps(fn)
    def routed(**kwargs: Any) -> BulkResult:
        if not _routed():
            return cast(BulkResult, fn(**kwargs))
        queue = kwargs.get("queue")
        targets = [alias_for_queue(queue)] if isinstance(queue, str) else aliases()
        total = BulkResult(affected=0, remaining=0)
        for alias in targets:
            with on_database(alias):
                answer = fn(**kwargs)
            total["affected"] += answer["affected"]
            total["remaining"] += answer["remaining"]
        return total
    return cast(F, routed)


def listing(fn: F) -> F:
    """``list_jobs``: on the ``queue=``'s database, or every database's page merged by id."""
    @functools.wraps(fn)
    def routed(**kwargs: Any) -> JobPage:
        queue = kwargs.get("queue")
        if not _routed():
            return cast(JobPage, fn(**kwargs))
        # A routed queue's staged enqueues wait in the outbox of the database they were staged on.
        if isinstance(queue, str) and kwargs.get("state") != "staged":
            with on_database(alias_for_queue(queue)):
                return cast(JobPage, fn(**kwargs))
        pages = []
        for alias in aliases():
            with on_database(alias):
                pages.append(fn(**kwargs))
        limit = kwargs.get("limit", 50)
        rows = sorted((job for page in pages for job in page["jobs"]), key=lambda job: job["id"], reverse=True)
        if kwargs.get("before") is not None:  # the page just newer than the cursor: its oldest rows
            picked = rows[-limit:]
            more_newer = len(rows) > limit or any(page["previous"] for page in pages)
            return JobPage(jobs=picked, next=picked[-1]["id"] if picked else None,
                           previous=picked[0]["id"] if picked and more_newer else None)
        picked = rows[:limit]
        more_older = len(rows) > limit or any(page["next"] for page in pages)
        more_newer = kwargs.get("after") is not None
        return JobPage(jobs=picked, next=picked[-1]["id"] if picked and more_older else None,
                       previous=picked[0]["id"] if picked and more_newer else None)
    return cast(F, routed)


def each_database(merge: Callable[[list[Any]], Any]) -> Callable[[F], F]:
    """A read answered from every database, its answers combined by ``merge``."""
    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def routed(*args: Any, **kwargs: Any) -> Any:
            if not _routed():
                return fn(*args, **kwargs)
            answers = []
            for alias in aliases():
                with on_database(alias):
                    answers.append(fn(*args, **kwargs))
            return merge(answers)
        return cast(F, routed)
    return wrap


def concatenated(answers: list[list[Any]]) -> list[Any]:
    return [item for answer in answers for item in answer]


def merged_stats(answers: list[list[QueueStats]]) -> list[QueueStats]:
    """One entry per queue: counts summed (a queue configured everywhere has zeros on the others),
    the oldest ready job the oldest of any database, paused if paused on any."""
    merged: dict[str, QueueStats] = {}
    for answer in answers:
        for entry in answer:
            seen = merged.get(entry["queue"])
            if seen is None:
                merged[entry["queue"]] = cast(QueueStats, dict(entry))
                continue
            for key in _SUMMED:
                seen[key] += entry[key]  # type: ignore[literal-required]
            seen["paused"] = seen["paused"] or entry["paused"]
            if entry["oldest_ready_at"] is not None and (seen["oldest_ready_at"] is None
                                                         or entry["oldest_ready_at"] < seen["oldest_ready_at"]):
                seen["oldest_ready_at"] = entry["oldest_ready_at"]
                seen["oldest_ready_age"] = entry["oldest_ready_age"]
    return [merged[q] for q in sorted(merged)]


def summed_totals(answers: list[list[CounterTotal]]) -> list[CounterTotal]:
    """``counter_totals`` of every database, summed per queue and outcome (a queue routed later
    has counts on both)."""
    summed: dict[tuple[str, str], int] = {}
    for answer in answers:
        for row in answer:
            summed[(row["queue"], row["outcome"])] = summed.get((row["queue"], row["outcome"]), 0) + row["count"]
    return [CounterTotal(queue=q, outcome=o, count=n) for (q, o), n in sorted(summed.items())]


def summed_counters(answers: list[Counters]) -> Counters:
    """``counters`` of every database: buckets summed per instant and outcome, totals summed."""
    merged = answers[0]
    buckets: dict[tuple[Any, str], int] = {}
    totals: dict[str, int] = {}
    for answer in answers:
        for bucket in answer["buckets"]:
            key = (bucket["at"], bucket["outcome"])
            buckets[key] = buckets.get(key, 0) + bucket["count"]
        for outcome, n in answer["totals"].items():
            totals[outcome] = totals.get(outcome, 0) + n
    return Counters(name=merged["name"], queue=merged["queue"], since=merged["since"], width=merged["width"],
                    buckets=[CounterBucket(at=at, outcome=o, count=n) for (at, o), n in sorted(buckets.items())],
                    totals=totals)


def doctor_everywhere(fn: Callable[[], DoctorReport]) -> Callable[[], DoctorReport]:
    """``doctor``: its checks on each database; a routed alias's names carry ``@<alias>``, and the
    scheduler's check runs once (its rows live on ``DATABASE``)."""
    @functools.wraps(fn)
    def routed() -> DoctorReport:
        if not _routed():
            return fn()
        with on_database(get_settings().DATABASE):
            report = fn()
        for alias in aliases()[1:]:
            with on_database(alias):
                other = fn()
            report["checks"] += [{**check, "name": f"{check['name']}@{alias}"}
                                 for check in other["checks"] if check["name"] != "scheduler-watermarks"]
        report["ok"] = all(check["ok"] for check in report["checks"])
        return report
    return routed
