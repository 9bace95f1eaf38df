"""Settings for bench/django_tasks_bench.py's child processes: one PostgreSQL database per backend,
``BENCH_TASKS_BACKEND`` = ``ultimate_jobs`` (UltimateJobsBackend) or ``dbtasks`` (django-tasks-db)."""

import os

BACKEND = os.environ.get("BENCH_TASKS_BACKEND", "ultimate_jobs")
SECRET_KEY = "bench"
USE_TZ = True
DEBUG = False
LOGGING_CONFIG = None
DATABASES = {"default": {
    "ENGINE": "django.db.backends.postgresql", "HOST": os.environ.get("BENCH_PG_HOST", "127.0.0.1"),
    "PORT": os.environ.get("BENCH_PG_PORT", "5432"), "USER": os.environ.get("BENCH_PG_USER", "postgres"),
    "PASSWORD": os.environ.get("BENCH_PG_PASSWORD", ""), "NAME": f"bench_djt_{BACKEND}", "CONN_MAX_AGE": None,
}}
if BACKEND == "ultimate_jobs":
    INSTALLED_APPS = ["ultimate_jobs"]
    TASKS = {"default": {"BACKEND": "ultimate_jobs.contrib.tasks.UltimateJobsBackend", "QUEUES": ["default"]}}
else:
    INSTALLED_APPS = ["django_tasks", "django_tasks_db"]
    TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["default"]}}
