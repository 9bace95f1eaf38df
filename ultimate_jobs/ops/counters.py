"""Internal: how attempts ended, counted in time buckets; re-exported by ``ultimate_jobs.ops``.

The worker's settling statement adds to ``JobCounter`` rows (``db/postgres.py``
``JOB_SETTLE_MANY``; the SQLite store in the settling transaction): per job name, queue and
outcome, a 1-minute bucket and an all-time row that never expires (the metrics'
``jobs_total``). Hourly, a worker folds minute buckets older than 24 h into 5-minute (kept 7
days) and 1-hour (kept 30 days) buckets, moving each count exactly once
(``runtime.housekeeping``); a read of a coarse tier adds the recent minute buckets,
re-bucketed, to the folded ones. Two upserts a settle, not four.
Outcomes: ``done``, ``retried``, ``failed``, ``dead``, ``interrupted`` (a drain handed the
attempt back), ``suspended``, ``cancelled`` (an operator's cancel), ``lease-lost`` (a worker
found it no longer held a running job's lease).

Usage::

    ops.counters("billing.charge", since=timezone.now() - timedelta(hours=1))
    # {"name": ..., "width": 60, "since": ..., "buckets": [{"at", "outcome", "count"}], "totals": {...}}
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import QuerySet, Sum

from ultimate_jobs import clock
from ultimate_jobs.errors import X_JOB_INPUT_INVALID, JobsError
from ultimate_jobs.jsoncodec import iso
from ultimate_jobs.models import JobCounter
from ultimate_jobs.models.operations import ALL_TIME, COUNTER_TIERS
from ultimate_jobs.ops import routes
from ultimate_jobs.ops.rows import alias
from ultimate_jobs.ops.types import CounterBucket, Counters, CounterTotal
from ultimate_jobs.runtime.housekeeping import floor_bucket

MINUTE = COUNTER_TIERS[0][0]


def _rows() -> QuerySet[JobCounter]:
    return JobCounter.objects.using(alias())


@routes.each_database(routes.summed_counters)
def counters(name: str | None = None, since: datetime | None = None, *, queue: str | None = None) -> Counters:
    """Outcome counts of job ``name`` (every job when None) since ``since`` (default: 24 h ago).

    The finest tier that still covers ``since`` answers: 1-minute buckets back to 24 h, 5-minute
    to 7 days, 1-hour to 30 days (older is clamped to 30 days). ``buckets`` are oldest first,
    ``totals`` add them up per outcome. Raise ``X_JOB_INPUT_INVALID`` for a naive ``since``.
    """
    now = clock.now()
    if since is None:
        since = now - timedelta(days=1)
    if not isinstance(since, datetime) or since.tzinfo is None:
        raise JobsError(X_JOB_INPUT_INVALID, f"since={since!r} must be an aware datetime.")
    age = (now - since).total_seconds()
    width, kept = next(((w, k) for w, k in COUNTER_TIERS if age <= k), COUNTER_TIERS[-1])
    since = max(since, now - timedelta(seconds=kept))
    start = floor_bucket(since, width)
    widths = [MINUTE] if width == MINUTE else [MINUTE, width]  # recent minutes + what was folded
    query = _rows().filter(width__in=widths, bucket__gte=start)
    if name is not None:
        query = query.filter(name=name)
    if queue is not None:
        query = query.filter(queue=queue)
    summed: dict[tuple[datetime, str], int] = {}
    for row in query.values("bucket", "outcome").order_by().annotate(n=Sum("count")):
        key = (floor_bucket(row["bucket"], width), row["outcome"])
        summed[key] = summed.get(key, 0) + int(row["n"])
    buckets = [CounterBucket(at=iso(at), outcome=outcome, count=n) for (at, outcome), n in sorted(summed.items())]
    totals: dict[str, int] = {}
    for bucket in buckets:
        totals[bucket["outcome"]] = totals.get(bucket["outcome"], 0) + bucket["count"]
    # By outcome, whatever minute each outcome first appeared in (a run straddling a minute
    # boundary listed them in another order: docs/examples/operator_actions.py failed on it).
    totals = dict(sorted(totals.items()))
    return Counters(name=name, queue=queue, since=iso(start), width=width, buckets=buckets, totals=totals)


@routes.each_database(routes.summed_totals)
def counter_totals() -> list[CounterTotal]:
    """All-time counts per queue and outcome, by queue then outcome: ``[{"queue", "outcome",
    "count"}]`` — monotonic, what ``jobs_total`` and ``job_leases_lost_total`` export."""
    grouped = (_rows().filter(width=ALL_TIME).values("queue", "outcome").order_by("queue", "outcome")
               .annotate(n=Sum("count")))
    return [CounterTotal(queue=row["queue"], outcome=row["outcome"], count=int(row["n"])) for row in grouped]


