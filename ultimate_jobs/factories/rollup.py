"""``rollup()``: recompute the recent buckets of a time series into the app's own table.

Usage::

    # stats/jobs.py
    from django.db.models import Count
    from django.db.models.functions import TruncDay
    from ultimate_jobs import rollup, task

    daily_hits = rollup(
        name="stats.daily-hits", into=DailyHits, key=["org", "day"], lookback="2d", bucket="day",
        tz="Europe/Berlin",
        source=lambda *, since, bucket, tz, org: (Hit.objects.filter(org=org, at__gte=since)
                                                  .annotate(day=TruncDay("at", tzinfo=tz)).values("day")
                                                  .annotate(hits=Count("id"))),
        map=lambda point, *, org: DailyHits(org=org, day=point["day"], hits=point["hits"]),
        tenant="{org}")
    task(name="stats.daily-hits", cron="*/10 * * * *", tz="UTC", job=daily_hits, input={"org": "acme"})

Options: ``name``, ``into`` (a Django model), ``key`` (field names of ``into`` exactly matching one
of its unique constraints: the upsert's conflict target), ``lookback`` (a positive duration: how
late a row may arrive and still count), ``bucket`` (``minute``, ``hour``, ``day``, ``week``
(Monday) or ``month``), ``tz`` (an IANA zone name), ``source`` (``callable(*, since, bucket, tz,
**input)`` answering a QuerySet or iterable of points; ``tz`` is a ``ZoneInfo``), ``map``
(``callable(point, **input)`` answering an ``into`` instance or a dict of its fields), ``tenant``
(``NO_TENANT``), ``queue``, ``retry``. Not scheduled by itself: a ``task()`` enqueues it.

Each run reads the clock once (step ``now``), takes ``since`` = the first instant of the bucket
holding ``now - lookback`` in ``tz`` (DST included: a day in Europe/Berlin may be 23 or 25 hours,
so the first bucket is read whole), maps every point and writes them all in ONE
``bulk_create(update_conflicts=True, unique_fields=key)`` inside one transaction (step
``upsert``): all buckets or none. A rerun over the same rows writes the same values; a late row
inside ``lookback`` moves its bucket on the next run. Not handled: a row older than ``lookback``
when it lands, and a bucket whose rows were all deleted (it keeps its last value). Result:
``{"since", "rows"}``.

Refused at declaration: ``X_JOB_ROLLUP_INVALID`` (no or non-positive lookback, an unknown bucket, a
zone that is not IANA, a ``key`` no unique constraint of ``into`` matches, a ``source`` or ``map``
that is not callable).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypedDict, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.db import models, router, transaction

from ultimate_jobs import clock
from ultimate_jobs.context import JobContext
from ultimate_jobs.durations import Duration
from ultimate_jobs.errors import X_JOB_INPUT_INVALID, X_JOB_ROLLUP_INVALID, JobsError, Terminal
from ultimate_jobs.factories.kit import declare, input_key, named, positive_duration
from ultimate_jobs.handle import JobHandle
from ultimate_jobs.inputs import NO_TENANT, Tenant
from ultimate_jobs.retry import Retry

__all__ = ["BUCKETS", "RollupResult", "bucket_start", "rollup"]

Bucket = Literal["minute", "hour", "day", "week", "month"]
BUCKETS: tuple[Bucket, ...] = ("minute", "hour", "day", "week", "month")
M = TypeVar("M", bound=models.Model)


class RollupResult(TypedDict):
    """A run's result: the first instant read (ISO), and the rows upserted."""

    since: str
    rows: int


def bucket_start(instant: datetime, bucket: Bucket, zone: ZoneInfo) -> datetime:
    """The first instant of the ``bucket`` holding ``instant``, bounded in ``zone`` (an aware
    datetime in ``zone``). Local midnight is found on the wall clock, then converted: the day of a
    DST change starts at its own offset."""
    local = instant.astimezone(zone)
    if bucket == "minute":
        start = local.replace(second=0, microsecond=0)
    elif bucket == "hour":
        start = local.replace(minute=0, second=0, microsecond=0)  # keeps fold: the repeated hour stays itself
    else:
        day = local.date()
        if bucket == "week":
            day -= timedelta(days=day.weekday())
        elif bucket == "month":
            day = day.replace(day=1)
        start = datetime(day.year, day.month, day.day, tzinfo=zone)
    return start.astimezone(UTC).astimezone(zone)  # a wall time in a DST gap normalised to a real instant


def rollup(*, name: str, into: type[M], key: Sequence[str], lookback: Duration | None, bucket: Bucket, tz: str,
           source: Callable[..., Iterable[object]], map: Callable[..., M | Mapping[str, object]],
           tenant: Tenant = NO_TENANT, queue: str = "default",
           retry: Retry | int | None = None) -> JobHandle[..., RollupResult]:
    """Declare a rollup; see the module docstring for every option and refusal.

    ``source(*, since, bucket, tz, **input)`` answers the points, ``map(point, **input)`` one row of
    ``into`` (an instance or a dict of its fields). The handle's input is the app's keyword-only
    input, which no ParamSpec literal spells: it answers ``JobHandle[..., RollupResult]``."""
    name, owner = named("rollup", name)

    def refuse(cause: str) -> JobsError:
        return JobsError(X_JOB_ROLLUP_INVALID, f"{owner}: {cause}")

    if lookback is None:
        raise refuse("has no lookback; it is how late a row may arrive and still count.")
    window = positive_duration(lookback, owner=owner, option="lookback", code=X_JOB_ROLLUP_INVALID)
    if bucket not in BUCKETS:
        raise refuse(f"bucket={bucket!r} is not one of {', '.join(BUCKETS)}.")
    try:
        zone = ZoneInfo(tz) if isinstance(tz, str) and tz else None
    except (ZoneInfoNotFoundError, ValueError):
        zone = None
    if zone is None:
        raise refuse(f"tz={tz!r} is not an IANA time zone name such as 'Europe/Berlin'.")
    if not (isinstance(into, type) and issubclass(into, models.Model)):
        raise refuse(f"into={into!r} is not a Django model.")
    if isinstance(key, str) or not isinstance(key, Sequence) or not key:
        raise refuse(f"key={key!r} is not a list of field names.")
    key = tuple(key)
    if not unique_covers(into, key):
        raise refuse(f"no unique constraint of {into.__name__} is exactly {list(key)}; the upsert needs one as its "
                     "conflict target.")
    for option, value in (("source", source), ("map", map)):
        if not callable(value):
            raise refuse(f"{option}={value!r} is not callable.")
    updated = [f.name for f in into._meta.concrete_fields if not f.primary_key and f.name not in key]

    def body(ctx: JobContext, /, **input: Any) -> RollupResult:
        now = datetime.fromisoformat(ctx.step.run("now", lambda: clock.now().isoformat()))
        since = bucket_start(now - timedelta(seconds=window), bucket, zone)

        def upsert() -> RollupResult:
            rows = [as_row(into, map(point, **input), owner) for point in source(since=since, bucket=bucket, tz=zone,
                                                                                  **input)]
            database = router.db_for_write(into)
            with transaction.atomic(using=database):
                into._default_manager.using(database).bulk_create(
                    rows, update_conflicts=True, unique_fields=list(key), update_fields=updated or None)
            return {"since": since.isoformat(), "rows": len(rows)}

        out: RollupResult = ctx.step.run("upsert", upsert)
        return out

    return declare(body, label=f"rollup[{name}]", doc=f"The rollup {name!r} into {into.__name__}.", name=name,
                   idempotency_key=input_key(name), tenant=tenant, queue=queue, retry=retry)


def unique_covers(model: type[models.Model], key: tuple[str, ...]) -> bool:
    """Whether a unique constraint (unconditional), ``unique_together`` or a unique field of
    ``model`` is exactly ``key``."""
    wanted = set(key)
    sets = [set(c.fields) for c in model._meta.total_unique_constraints]
    sets += [set(fields) for fields in model._meta.unique_together]
    sets += [{f.name} for f in model._meta.concrete_fields if f.unique]
    return wanted in sets and len(wanted) == len(key)


def as_row(model: type[M], value: object, owner: str) -> M:
    if isinstance(value, model):
        return value
    if isinstance(value, dict):
        return model(**value)
    raise Terminal(f"{owner}: map answered {type(value).__name__}; it must answer a {model.__name__} or a dict "
                   "of its fields.", code=X_JOB_INPUT_INVALID)
