"""Backfills: backfill() over a small table (25 rows, 10 a page), run in-process with run_job on a
frozen clock. Prints the pass's result, one step per page holding a cursor and a count, the
BackfillRun ledger row, the pacer's waits, pending_backfills() before and after, a second run
that is skipped, a forced sweep into a new ledger row, and a refusal at declaration.

The table is a model declared in this script (app_label "shop") and created with the schema
editor; in a project it is one of your app's models, migrated as usual.

Run it: python docs/examples/backfill.py
"""

import atexit
import tempfile
from datetime import UTC, datetime

import django
from django.conf import settings
from django.db import connection, models
from django.utils.text import slugify

TMP = tempfile.TemporaryDirectory()
atexit.register(TMP.cleanup)
settings.configure(
    INSTALLED_APPS=["ultimate_jobs"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": f"{TMP.name}/jobs.sqlite3"}},
    USE_TZ=True,
    ULTIMATE_JOBS={"ENVIRONMENT": "staging"},
)
django.setup()

# After setup, as in a project's jobs.py: a backfill's ledger is a model.
from ultimate_jobs import NO_TENANT, JobsError, backfill, pending_backfills  # noqa: E402


class Post(models.Model):
    title = models.CharField(max_length=100)
    slug = models.CharField(max_length=100, default="")

    class Meta:
        app_label = "shop"


def fill_slugs(batch) -> None:
    # At least once per page: only rows still without a slug are written, so a replay is harmless.
    for post in batch.rows:
        Post.objects.filter(pk=post.pk, slug="").update(slug=slugify(post.title))


rewrite_slugs = backfill(
    name="shop.rewrite-slugs", tenant=NO_TENANT,
    source=lambda ctx: Post.objects.filter(slug=""),
    handle=fill_slugs,
    count=lambda ctx: Post.objects.filter(slug="").count(),  # checked after the last page
    batch=10,                                                # rows per page (and per step)
)                                                            # rate: 5 batches a second (the default)

prod_only = backfill(
    name="shop.prod-only", tenant=NO_TENANT, environments=["production"],
    source=lambda ctx: Post.objects.all(), handle=lambda batch: None,
)


def states() -> dict:
    return {row["name"]: row["state"] for row in pending_backfills()["backfills"]}


def main() -> None:
    from django.core.management import call_command

    from ultimate_jobs import ops
    from ultimate_jobs.testing import freeze_clock, run_job

    call_command("migrate", verbosity=0)
    with connection.schema_editor() as editor:
        editor.create_model(Post)
    Post.objects.bulk_create([Post(title=f"Post number {i}") for i in range(1, 26)])

    report = pending_backfills()
    print("environment:", report["environment"])
    print("before:", states(), "unswept:", report["pending"])

    with freeze_clock(datetime(2026, 5, 4, 9, tzinfo=UTC)) as clock:
        first = run_job(rewrite_slugs)
        print("state:", first.state)
        print("result:", first.result)
        for name, step in first.steps.items():
            print(f"  {name}: {step.output}")
        print("pacer waits (s):", clock.pauses)  # the first page waits for nothing
    print("slugs:", Post.objects.filter(slug="").count(), "empty,", Post.objects.get(pk=25).slug)

    row = ops.get_job(first.id)["backfill"]
    print("ledger:", row["status"], "rows", row["rows"], "batches", row["batches"], "last_cursor",
          row["last_cursor"])
    report = pending_backfills()
    print("after:", states(), "unswept:", report["pending"])

    with freeze_clock(datetime(2026, 5, 4, 10, tzinfo=UTC)):
        again = run_job(rewrite_slugs)  # a new job, a no-op pass: a completed one is in the ledger
        print("again:", again.state, "skipped", again.result["skipped"], "batches", again.result["batches"],
              "previous is first:", again.result["previous_run_id"] == str(first.run_id))
        forced = run_job(rewrite_slugs, force=True)  # sweeps again (nothing left), into a new row
        print("forced:", forced.result["skipped"], forced.result["rows"], "rows;",
              [(r["status"], r["forced"], r["rows"]) for r in ops.backfill_runs(name="shop.rewrite-slugs")])

    try:
        backfill(name="shop.flat-out", tenant=NO_TENANT, source=lambda ctx: Post.objects.all(),
                 handle=fill_slugs, rate=0)
    except JobsError as err:
        print("refused:", err.code, "-", err.cause.split(";")[0])


if __name__ == "__main__":
    main()

# Output:
# environment: staging
# before: {'shop.prod-only': 'excluded', 'shop.rewrite-slugs': 'pending'} unswept: ['shop.rewrite-slugs']
# state: done
# result: {'name': 'shop.rewrite-slugs', 'batches': 3, 'rows': 25, 'skipped': False, 'previous_run_id': None}
#   batch:0: {'cursor': 10, 'rows': 10}
#   batch:1: {'cursor': 20, 'rows': 10}
#   batch:2: {'cursor': 25, 'rows': 5}
# pacer waits (s): [0.2, 0.2]
# slugs: 0 empty, post-number-25
# ledger: completed rows 25 batches 3 last_cursor 25
# after: {'shop.prod-only': 'excluded', 'shop.rewrite-slugs': 'completed'} unswept: []
# again: done skipped True batches 0 previous is first: True
# forced: False 0 rows; [('completed', True, 0), ('completed', False, 25)]
# refused: X_JOB_DECLARATION_INVALID - backfill 'shop.flat-out' declares rate=0
