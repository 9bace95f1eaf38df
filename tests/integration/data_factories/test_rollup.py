"""``rollup()`` on PostgreSQL and SQLite: only the buckets inside ``lookback`` are recomputed,
bucket boundaries in ``tz`` across a DST change, one upsert (all buckets or none), refusals."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from django.db.models import Count
from django.db.models.functions import TruncDay

from tests.app.models import DailyHits, Hit, Post
from tests.error_codes import refused
from ultimate_jobs import rollup
from ultimate_jobs.factories.rollup import bucket_start
from ultimate_jobs.testing import run_job

pytestmark = pytest.mark.django_db(transaction=True)
BERLIN = ZoneInfo("Europe/Berlin")


def per_day(*, since, bucket, tz, org):
    return (Hit.objects.filter(org=org, at__gte=since).annotate(day=TruncDay("at", tzinfo=tz))
            .values("day").annotate(hits=Count("id")).order_by("day"))


def declare_rollup(track, **options):
    return track(rollup(**{"name": "ru.daily", "into": DailyHits, "key": ["org", "day"], "lookback": "1d",
                           "bucket": "day", "tz": "Europe/Berlin", "source": per_day,
                           "map": lambda point, *, org: DailyHits(org=org, day=point["day"], hits=point["hits"]),
                           "tenant": "{org}", **options}))


def hit(at: datetime, n: int = 1, org: str = "acme") -> None:
    Hit.objects.bulk_create([Hit(org=org, at=at) for _ in range(n)])


def table() -> dict[datetime, int]:
    return {row.day.astimezone(UTC): row.hits for row in DailyHits.objects.filter(org="acme")}


def test_the_first_bucket_starts_at_local_midnight_on_a_dst_day(track, jobs_clock) -> None:
    # 2026-03-29 is 23 hours long in Berlin: midnight is 23:00 UTC the day before (CET, +01:00).
    jobs_clock.set(datetime(2026, 3, 30, 12, 0, tzinfo=UTC))
    hit(datetime(2026, 3, 28, 22, 30, tzinfo=UTC), 5)   # 23:30 on the 28th in Berlin: outside the window
    hit(datetime(2026, 3, 28, 23, 30, tzinfo=UTC), 2)   # 00:30 on the 29th: the first bucket, read whole
    hit(datetime(2026, 3, 29, 21, 59, tzinfo=UTC), 1)   # 23:59 CEST on the 29th
    hit(datetime(2026, 3, 29, 22, 0, tzinfo=UTC), 4)    # 00:00 CEST on the 30th
    DailyHits.objects.create(org="acme", day=datetime(2026, 3, 27, 23, 0, tzinfo=UTC), hits=99)  # older bucket

    trace = run_job(declare_rollup(track), org="acme")

    assert trace.state == "done"
    assert trace.result == {"since": "2026-03-29T00:00:00+01:00", "rows": 2}
    assert table() == {datetime(2026, 3, 27, 23, 0, tzinfo=UTC): 99,   # outside lookback: untouched
                       datetime(2026, 3, 28, 23, 0, tzinfo=UTC): 3,    # the 29th (CET midnight)
                       datetime(2026, 3, 29, 22, 0, tzinfo=UTC): 4}    # the 30th (CEST midnight)


def test_a_rerun_is_idempotent_and_a_late_row_moves_its_bucket(track, jobs_clock) -> None:
    jobs_clock.set(datetime(2026, 7, 2, 10, 0, tzinfo=UTC))
    hit(datetime(2026, 7, 1, 8, 0, tzinfo=UTC), 3)
    handle = declare_rollup(track)
    run_job(handle, org="acme")
    first = table()
    run_job(handle, org="acme")
    assert table() == first == {datetime(2026, 6, 30, 22, 0, tzinfo=UTC): 3}
    assert DailyHits.objects.count() == 1  # upserted on (org, day), never a second row

    hit(datetime(2026, 7, 1, 9, 0, tzinfo=UTC), 2)  # arrives late, inside lookback
    run_job(handle, org="acme")
    assert table() == {datetime(2026, 6, 30, 22, 0, tzinfo=UTC): 5}


def test_one_bad_row_writes_no_bucket(track, jobs_clock) -> None:
    jobs_clock.set(datetime(2026, 7, 2, 10, 0, tzinfo=UTC))
    hit(datetime(2026, 7, 1, 8, 0, tzinfo=UTC), 3)
    hit(datetime(2026, 7, 2, 8, 0, tzinfo=UTC), 1)
    DailyHits.objects.create(org="acme", day=datetime(2026, 6, 30, 22, 0, tzinfo=UTC), hits=7)

    def bad_map(point, *, org):
        hits = None if point["hits"] == 1 else point["hits"]  # a NOT NULL column left empty
        return {"org": org, "day": point["day"], "hits": hits}

    trace = run_job(declare_rollup(track, map=bad_map, retry=1), org="acme")

    assert trace.state == "dead"
    assert table() == {datetime(2026, 6, 30, 22, 0, tzinfo=UTC): 7}  # all buckets or none


@pytest.mark.parametrize(("moment", "bucket", "start"), [
    (datetime(2026, 10, 25, 0, 30, tzinfo=UTC), "hour", datetime(2026, 10, 25, 0, 0, tzinfo=UTC)),  # the 1st 02:xx
    (datetime(2026, 10, 25, 1, 30, tzinfo=UTC), "hour", datetime(2026, 10, 25, 1, 0, tzinfo=UTC)),  # the 2nd 02:xx
    (datetime(2026, 10, 25, 12, 0, tzinfo=UTC), "day", datetime(2026, 10, 24, 22, 0, tzinfo=UTC)),  # CEST midnight
    (datetime(2026, 10, 28, 12, 0, tzinfo=UTC), "week", datetime(2026, 10, 25, 23, 0, tzinfo=UTC)),  # Monday, CET
    (datetime(2026, 11, 15, 12, 0, tzinfo=UTC), "month", datetime(2026, 10, 31, 23, 0, tzinfo=UTC)),
    (datetime(2026, 11, 15, 12, 7, 31, tzinfo=UTC), "minute", datetime(2026, 11, 15, 12, 7, tzinfo=UTC)),
])
def test_bucket_boundaries_are_wall_clock_boundaries_in_the_zone(moment, bucket, start) -> None:
    # compared in UTC: an ambiguous wall time never equals a time in another zone
    assert bucket_start(moment, bucket, BERLIN).astimezone(UTC) == start


def test_hour_buckets_through_the_repeated_hour(track, jobs_clock) -> None:
    jobs_clock.set(datetime(2026, 10, 25, 2, 0, tzinfo=UTC))
    hit(datetime(2026, 10, 25, 0, 10, tzinfo=UTC), 1)  # 02:10 CEST
    hit(datetime(2026, 10, 25, 1, 10, tzinfo=UTC), 2)  # 02:10 CET (the repeated hour)

    def per_hour(*, since, bucket, tz, org):  # an iterable of points, bucketed in Python
        counts = Counter(bucket_start(at, bucket, tz).astimezone(UTC)
                         for at in Hit.objects.filter(org=org, at__gte=since).values_list("at", flat=True))
        return [{"day": day, "hits": n} for day, n in counts.items()]

    trace = run_job(declare_rollup(track, bucket="hour", lookback="90m", source=per_hour), org="acme")
    assert trace.result["since"] == "2026-10-25T02:00:00+02:00"
    assert sorted(table().values()) == [1, 2]  # two buckets, not one merged "02:00"


@pytest.mark.parametrize("options", [{"lookback": None}, {"lookback": "0s"}, {"lookback": -5},
                                     {"bucket": "year"}, {"tz": "Mars/Olympus"}, {"tz": ""},
                                     {"key": ["org"]}, {"key": ["org", "day", "hits"]}, {"into": Post},
                                     {"into": "DailyHits"}, {"source": None}])
def test_bad_declarations_are_refused(track, options) -> None:
    with refused("X_JOB_ROLLUP_INVALID"):
        declare_rollup(track, **options)
