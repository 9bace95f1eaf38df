"""Materialized views: refresh_view() is REFRESH MATERIALIZED VIEW [CONCURRENTLY] in one step, and
only PostgreSQL has materialized views. This script runs on SQLite, where the declaration itself is
refused with X_JOB_REFRESH_VIEW_INVALID; docs/reference/refresh-view.md shows the PostgreSQL run
(tests/integration/data_factories/test_refresh_view.py runs it against a real view).

Run it: python docs/examples/refresh_view.py
"""

import atexit
import tempfile

import django
from django.conf import settings
from django.db import models

TMP = tempfile.TemporaryDirectory()
atexit.register(TMP.cleanup)
settings.configure(
    INSTALLED_APPS=["ultimate_jobs"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": f"{TMP.name}/jobs.sqlite3"}},
    USE_TZ=True,
)
django.setup()

from ultimate_jobs import JobsError, refresh_view  # noqa: E402


class PostTotals(models.Model):
    """The view, read through an unmanaged model (a migration's RunSQL creates it on PostgreSQL)."""

    post_id = models.BigIntegerField(primary_key=True)
    total = models.BigIntegerField()

    class Meta:
        app_label = "stats"
        managed = False
        db_table = "post_totals"


def main() -> None:
    for options in ({"view": PostTotals, "concurrently": True}, {"view": "post_totals"}, {"view": 42}):
        try:
            refresh_view(name="stats.refresh-post-totals", **options)
        except JobsError as err:
            print("refused:", err.code, err.cause)


if __name__ == "__main__":
    main()

# Output:
# refused: X_JOB_REFRESH_VIEW_INVALID refresh_view 'stats.refresh-post-totals': the database 'default' is sqlite, which has no materialized views.
# refused: X_JOB_REFRESH_VIEW_INVALID refresh_view 'stats.refresh-post-totals': the database 'default' is sqlite, which has no materialized views.
# refused: X_JOB_REFRESH_VIEW_INVALID refresh_view 'stats.refresh-post-totals': view=42 is neither a model nor a relation name.
