"""Django settings for the benchmark: ultimate_jobs plus the ``bench`` app (its ``jobs`` holds the no-op).

The database name comes from ``BENCH_UJ_DB`` (``bench/run.py`` creates and drops it; only ``bench_uj_*`` names
are accepted); the server from ``BENCH_PG_HOST``/``PORT``/``USER``/``PASSWORD`` (127.0.0.1:5432, postgres).
Worker processes run ``python -m django jobs_worker --settings bench.settings`` with the repository root on
``PYTHONPATH``.
"""

from __future__ import annotations

import os

DB_NAME = os.environ.get("BENCH_UJ_DB", "bench_uj_default")
if not DB_NAME.startswith("bench_uj_"):
    raise RuntimeError(f"BENCH_UJ_DB={DB_NAME!r}: the benchmark only uses bench_uj_* databases")

SECRET_KEY = "bench-only-not-a-secret"
DEBUG = False  # DEBUG=True would keep every query in memory
USE_TZ = True
TIME_ZONE = "UTC"  # Django sets TZ for the process: keep timestamps in UTC
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "ultimate_jobs", "bench"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "HOST": os.environ.get("BENCH_PG_HOST", "127.0.0.1"),
        "PORT": os.environ.get("BENCH_PG_PORT", "5432"),
        "USER": os.environ.get("BENCH_PG_USER", "postgres"),
        "PASSWORD": os.environ.get("BENCH_PG_PASSWORD", "postgres"),
        "NAME": DB_NAME,
        "CONN_MAX_AGE": None,
        # Django's default (None) never prepares; BENCH_PG_PREPARE_THRESHOLD=N measures psycopg's preparing.
        "OPTIONS": {"prepare_threshold": int(os.environ["BENCH_PG_PREPARE_THRESHOLD"])}
        if os.environ.get("BENCH_PG_PREPARE_THRESHOLD")
        else {},
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# Every setting at its default, as an app that adds only the INSTALLED_APPS line would run.
ULTIMATE_JOBS: dict[str, object] = {}
