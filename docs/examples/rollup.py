"""Rollups: rollup() recomputes only the buckets inside its lookback into the app's own table, the
bucket boundaries drawn in its time zone (here Europe/Berlin on the day DST starts, 23 hours long),
in ONE upsert on the table's unique key. Run in-process with run_job on a frozen clock; a task()
would enqueue it on a schedule. Also a refusal at declaration.

The tables are models declared in this script (app_label "stats") and created with the schema
editor; in a project they are your app's models, migrated as usual.

Run it: python docs/examples/rollup.py
"""

import atexit
import tempfile
from datetime import UTC, datetime

import django
from django.conf import settings
from django.db import connection, models

TMP = tempfile.TemporaryDirectory()
atexit.register(TMP.cleanup)
settings.configure(
    INSTALLED_APPS=["ultimate_jobs"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": f"{TMP.name}/jobs.sqlite3"}},
    USE_TZ=True,
)
django.setup()

from django.db.models import Count  # noqa: E402
from django.db.models.functions import TruncDay  # noqa: E402

from ultimate_jobs import JobsError, rollup  # noqa: E402
from ultimate_jobs.testing import freeze_clock, run_job  # noqa: E402


class Like(models.Model):
    org = models.CharField(max_length=20)
    created_at = models.DateTimeField()

    class Meta:
        app_label = "stats"


class LikesPerDay(models.Model):
    org = models.CharField(max_length=20)
    day = models.DateTimeField()
    likes = models.IntegerField()

    class Meta:
        app_label = "stats"
        constraints = [models.UniqueConstraint(fields=["org", "day"], name="stats_likes_org_day")]


def likes_by_day(*, since, bucket, tz, org):
    # `since` is the first instant of a bucket: the oldest bucket is read whole.
    return (Like.objects.filter(org=org, created_at__gte=since)
            .annotate(day=TruncDay("created_at", tzinfo=tz)).values("day").annotate(n=Count("id")))


daily_likes = rollup(
    name="stats.daily-likes", into=LikesPerDay, key=["org", "day"],
    lookback="1d",                 # how late a row may arrive and still count
    bucket="day", tz="Europe/Berlin",
    source=likes_by_day,
    map=lambda point, *, org: LikesPerDay(org=org, day=point["day"], likes=point["n"]),
    tenant="{org}")


def show() -> None:
    for row in LikesPerDay.objects.order_by("day"):
        print(f"  {row.day.astimezone(UTC):%Y-%m-%d %H:%M} UTC  likes={row.likes}")


def main() -> None:
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    with connection.schema_editor() as editor:
        editor.create_model(Like)
        editor.create_model(LikesPerDay)
    for at, n in ((datetime(2026, 3, 28, 22, 30, tzinfo=UTC), 4),   # 23:30 on the 28th in Berlin
                  (datetime(2026, 3, 28, 23, 30, tzinfo=UTC), 2),   # 00:30 on the 29th (CET)
                  (datetime(2026, 3, 29, 21, 0, tzinfo=UTC), 1),    # 23:00 on the 29th (CEST)
                  (datetime(2026, 3, 30, 8, 0, tzinfo=UTC), 3)):    # the 30th
        Like.objects.bulk_create([Like(org="acme", created_at=at) for _ in range(n)])
    LikesPerDay.objects.create(org="acme", day=datetime(2026, 3, 27, 23, 0, tzinfo=UTC), likes=99)

    with freeze_clock(datetime(2026, 3, 30, 12, 0, tzinfo=UTC)):
        trace = run_job(daily_likes, org="acme")
    print("result:", trace.result)     # the 29th began at 00:00 CET: 23:00 UTC the day before
    show()                             # the 28th is outside the lookback: its 99 stays as it was

    Like.objects.create(org="acme", created_at=datetime(2026, 3, 29, 10, 0, tzinfo=UTC))  # late, inside
    with freeze_clock(datetime(2026, 3, 30, 12, 5, tzinfo=UTC)):
        run_job(daily_likes, org="acme")
    print("after a late like:")
    show()

    try:
        rollup(name="stats.bad", into=LikesPerDay, key=["org"], lookback="1d", bucket="day",
               tz="Europe/Berlin", source=likes_by_day, map=lambda point, **_: None)
    except JobsError as err:
        print("refused:", err.code, err.cause)


if __name__ == "__main__":
    main()

# Output:
# result: {'since': '2026-03-29T00:00:00+01:00', 'rows': 2}
#   2026-03-27 23:00 UTC  likes=99
#   2026-03-28 23:00 UTC  likes=3
#   2026-03-29 22:00 UTC  likes=3
# after a late like:
#   2026-03-27 23:00 UTC  likes=99
#   2026-03-28 23:00 UTC  likes=4
#   2026-03-29 22:00 UTC  likes=3
# refused: X_JOB_ROLLUP_INVALID rollup 'stats.bad': no unique constraint of LikesPerDay is exactly ['org']; the upsert needs one as its conflict target.
