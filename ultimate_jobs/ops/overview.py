"""Internal: the health of the whole system at a glance, re-exported by ``ultimate_jobs.ops``.

``overview()`` is what the admin's overview page draws and ``jobs stats --json`` prints under
``"overview"``: per queue, attempts done and failed per time bucket over the last hour (1-minute
buckets) and the last day (15-minute buckets) from the outcome counters (``ops.counters``), the
current depth (jobs runnable now) and the oldest ready job's age; the live workers; the
scheduled tasks due next; the jobs that died in the last 24 h. "failed" counts the attempts that
ended in an error: outcomes ``retried``, ``failed``, ``dead`` and ``lease-lost``.

Usage::

    view = ops.overview()
    view["queues"][0]["hour"]["done"]      # 60 counts, oldest minute first
    ops.overview(tenant_id="acme")         # one tenant: its dead jobs only (counters are fleet-wide)

Under ``QUEUE_DATABASES`` every number covers every jobs database: the queue stats, workers and
counters through their routed ``ops`` reads, the dead jobs merged newest first.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TypedDict

from django.db.models import Sum

from ultimate_jobs import clock
from ultimate_jobs.jsoncodec import iso
from ultimate_jobs.models import JobCounter
from ultimate_jobs.ops import routes
from ultimate_jobs.ops.queues import queue_stats, scheduled_tasks, workers
from ultimate_jobs.ops.rows import alias, jobs
from ultimate_jobs.ops.types import QueueStats, ScheduledTask, WorkerInfo
from ultimate_jobs.redact import redact_text
from ultimate_jobs.runtime.housekeeping import floor_bucket

FAILED_OUTCOMES = ("retried", "failed", "dead", "lease-lost")
WINDOWS = {"hour": (60, 60), "day": (900, 96)}  # name -> (bucket width in seconds, buckets)
DEAD_SHOWN = 50
TASKS_SHOWN = 10


class Series(TypedDict):
    """Counts per bucket, oldest first: ``start`` is the first bucket's start, ``width`` seconds."""

    start: str
    width: int
    done: list[int]
    failed: list[int]


class QueueOverview(TypedDict):
    queue: str
    depth: int
    delayed: int
    running: int
    oldest_ready_age: float | None
    paused: bool
    hour: Series
    day: Series


class DeadJob(TypedDict):
    id: str
    name: str
    queue: str
    tenant_id: str | None
    finished_at: str | None
    error_code: str | None
    error: str | None


class Overview(TypedDict):
    at: str
    tenant_id: str | None
    queues: list[QueueOverview]
    workers: list[WorkerInfo]
    tasks_due: list[ScheduledTask]
    dead_last_day: list[DeadJob]
    dead_last_day_count: int


def _merged_series(answers: list[dict[str, dict[str, Series]]]) -> dict[str, dict[str, Series]]:
    """Every database's series summed per queue, window and bucket (a queue routed later has
    counts on both)."""
    merged = answers[0]
    for answer in answers[1:]:
        for queue, windows in answer.items():
            seen = merged.setdefault(queue, windows)
            if seen is windows:
                continue
            for name, series in windows.items():
                for kind in ("done", "failed"):
                    seen[name][kind] = [a + b for a, b in zip(seen[name][kind], series[kind], strict=True)]
    return merged


def _merged_dead(answers: list[tuple[list[DeadJob], int]]) -> tuple[list[DeadJob], int]:
    """Every database's dead jobs, newest first, and their counts summed."""
    rows = sorted((job for dead, _ in answers for job in dead), key=lambda job: job["finished_at"] or "",
                  reverse=True)
    return rows[:DEAD_SHOWN], sum(count for _, count in answers)


@routes.each_database(_merged_series)
def _series(now: datetime) -> dict[str, dict[str, Series]]:
    """Per queue and window, done and failed counts per bucket, from the minute counters (the
    last 24 h are all minute buckets; ``ops.counters`` documents the tiers). One query."""
    starts = {name: floor_bucket(now, width) - timedelta(seconds=width * (count - 1))
              for name, (width, count) in WINDOWS.items()}
    rows = (JobCounter.objects.using(alias()).filter(width=60, bucket__gte=min(starts.values()))
            .values("queue", "bucket", "outcome").order_by().annotate(n=Sum("count")))
    out: dict[str, dict[str, Series]] = {}
    for row in rows:
        kind = "done" if row["outcome"] == "done" else "failed" if row["outcome"] in FAILED_OUTCOMES else None
        if kind is None:
            continue
        per_queue = out.setdefault(row["queue"], _empty(starts))
        for name, (width, count) in WINDOWS.items():
            slot = int((row["bucket"] - starts[name]).total_seconds() // width)
            if 0 <= slot < count:
                series = per_queue[name]
                (series["done"] if kind == "done" else series["failed"])[slot] += int(row["n"])
    return out


def _empty(starts: dict[str, datetime]) -> dict[str, Series]:
    return {name: Series(start=iso(starts[name]), width=width, done=[0] * count, failed=[0] * count)
            for name, (width, count) in WINDOWS.items()}


@routes.each_database(_merged_dead)
def _dead(now: datetime, tenant_id: str | None) -> tuple[list[DeadJob], int]:
    query = jobs().filter(state="dead", finished_at__gte=now - timedelta(days=1))
    if tenant_id is not None:
        query = query.filter(tenant_id=tenant_id)
    rows = query.order_by("-finished_at").values("id", "name", "queue", "tenant_id", "finished_at", "error_code",
                                                  "last_error")[:DEAD_SHOWN]
    dead = [DeadJob(id=str(r["id"]), name=r["name"], queue=r["queue"], tenant_id=r["tenant_id"],
                    finished_at=iso(r["finished_at"]), error_code=r["error_code"], error=redact_text(r["last_error"]))
            for r in rows]
    return dead, (len(dead) if len(dead) < DEAD_SHOWN else query.count())


def overview(*, tenant_id: str | None = None) -> Overview:
    """The overview page's numbers. With ``tenant_id``, only that tenant's dead jobs: queue
    depths, counters, workers and tasks add up every tenant, so they are left empty."""
    now = clock.now()
    dead, dead_count = _dead(now, tenant_id)
    if tenant_id is not None:
        return Overview(at=iso(now), tenant_id=tenant_id, queues=[], workers=[], tasks_due=[], dead_last_day=dead,
                        dead_last_day_count=dead_count)
    series = _series(now)
    starts = {name: floor_bucket(now, width) - timedelta(seconds=width * (count - 1))
              for name, (width, count) in WINDOWS.items()}
    queues = [_queue(stats, series.get(stats["queue"]) or _empty(starts)) for stats in queue_stats()]
    due = sorted((t for t in scheduled_tasks() if t["next_run"] and not t["paused"]), key=lambda t: str(t["next_run"]))
    alive = [w for w in workers() if w["status"] == "alive"]  # the presumed dead are on the workers page
    return Overview(at=iso(now), tenant_id=None, queues=queues, workers=alive, tasks_due=due[:TASKS_SHOWN],
                    dead_last_day=dead, dead_last_day_count=dead_count)


def _queue(stats: QueueStats, series: dict[str, Series]) -> QueueOverview:
    return QueueOverview(queue=stats["queue"], depth=stats["ready"], delayed=stats["delayed"],
                         running=stats["running"], oldest_ready_age=stats["oldest_ready_age"],
                         paused=stats["paused"], hour=series["hour"], day=series["day"])
