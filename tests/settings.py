"""Settings for the test suite.

``JOBS_TEST_DB=postgres`` (the default when PostgreSQL answers) or ``sqlite``. ``DATABASE_URL``
points at another PostgreSQL. Worker processes started by the process tests read
``JOBS_TEST_DB_NAME`` to join the test database the suite created.
"""

from __future__ import annotations

import os
import tempfile
from urllib.parse import urlparse

SECRET_KEY = "ultimate-jobs-tests"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "ultimate_jobs",
    "tests.app",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "tests.urls"
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": [
        "django.template.context_processors.request",
        "django.contrib.auth.context_processors.auth",
        "django.contrib.messages.context_processors.messages",
    ]},
}]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
STATIC_URL = "/static/"  # the admin's CSS, served by the live server in the browser tests


def _postgres_answers() -> bool:
    """Probe PostgreSQL once, so ``make test`` can fall back to SQLite with a loud notice."""
    import psycopg

    url = urlparse(os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/postgres")
    try:
        psycopg.connect(host=url.hostname or "127.0.0.1", port=url.port or 5432, user=url.username or "postgres",
                        password=url.password or "", dbname="postgres", connect_timeout=3).close()
    except psycopg.Error:
        return False
    return True


BACKEND = os.environ.get("JOBS_TEST_DB")
if BACKEND is None:
    BACKEND = "postgres" if _postgres_answers() else "sqlite"
    if BACKEND == "sqlite":
        if os.environ.get("REQUIRE_POSTGRES") == "1":
            raise RuntimeError("REQUIRE_POSTGRES=1 but PostgreSQL does not answer at DATABASE_URL or "
                               "127.0.0.1:5432; start it or unset REQUIRE_POSTGRES.")
        import sys

        sys.stderr.write("\n" + "!" * 78 + "\n!! PostgreSQL is not reachable: running the suite on SQLite only.\n"
                         "!! Set DATABASE_URL or start PostgreSQL; REQUIRE_POSTGRES=1 makes this an error.\n"
                         + "!" * 78 + "\n\n")
    os.environ["JOBS_TEST_DB"] = BACKEND
_joined = os.environ.get("JOBS_TEST_DB_NAME")  # a worker process joining the suite's test database

if BACKEND == "sqlite":
    _path = _joined or os.path.join(tempfile.gettempdir(), f"ultimate-jobs-test-{os.getpid()}.sqlite3")
    DATABASES = {"default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": _path,
        "TEST": {"NAME": _path},
        "OPTIONS": {"timeout": 30, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL;"},
    }}
else:
    url = urlparse(os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/ultimate_jobs")
    DATABASES = {"default": {
        "ENGINE": "django.db.backends.postgresql",
        "HOST": url.hostname or "127.0.0.1",
        "PORT": url.port or 5432,
        "USER": url.username or "postgres",
        "PASSWORD": url.password or "",
        "NAME": _joined or (url.path.lstrip("/") or "ultimate_jobs"),
        "CONN_MAX_AGE": 0,
        "TEST": {"NAME": f"test_uj_{os.environ.get('JOBS_TEST_RUN', os.getpid())}"},
    }}

# The store contract suite (tests/store_contract/) runs on both databases in one run: the other
# backend is a second alias, set up only when a test asks for it (pytest-django creates the test
# databases the tests name). A worker process joining the suite's database needs none.
CONTRACT_ALIASES: dict[str, str] = {BACKEND: "default"}
if not _joined:
    if BACKEND == "postgres":
        _contract_path = os.path.join(tempfile.gettempdir(), f"ultimate-jobs-contract-{os.getpid()}.sqlite3")
        DATABASES["sqlite"] = {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": _contract_path,
            "TEST": {"NAME": _contract_path},
            "OPTIONS": {"timeout": 30, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL;"},
        }
        CONTRACT_ALIASES["sqlite"] = "sqlite"
    elif _postgres_answers():
        url = urlparse(os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/ultimate_jobs")
        DATABASES["postgres"] = {
            "ENGINE": "django.db.backends.postgresql",
            "HOST": url.hostname or "127.0.0.1",
            "PORT": url.port or 5432,
            "USER": url.username or "postgres",
            "PASSWORD": url.password or "",
            "NAME": url.path.lstrip("/") or "ultimate_jobs",
            "CONN_MAX_AGE": 0,
            "TEST": {"NAME": f"test_uj_contract_{os.environ.get('JOBS_TEST_RUN', os.getpid())}"},
        }
        CONTRACT_ALIASES["postgres"] = "postgres"

# QUEUE_DATABASES (tests/integration/routing/, tests/process/test_routing_processes.py): a second
# PostgreSQL database, ``jobs_routed``, set up only by the tests that name it. A worker process
# joining the suite gets its name and the routes by env.
if BACKEND == "postgres" and (not _joined or os.environ.get("JOBS_TEST_ROUTED_NAME")):
    DATABASES["jobs_routed"] = {
        **DATABASES["default"],
        "NAME": os.environ.get("JOBS_TEST_ROUTED_NAME") or "uj_routed",
        "TEST": {"NAME": f"test_uj_routed_{os.environ.get('JOBS_TEST_RUN', os.getpid())}"},
    }
# A second PostgreSQL *cluster* (tests/support/clusters.py creates it with pg_createcluster on port
# 5435 and migrates a database on it): the ``jobs_cluster2`` alias, configured only in the processes
# that reach it (worker processes, ``manage.py`` commands) by env. The test process stages routed
# jobs in the outbox of ``default`` and reads the cluster with a psycopg connection of its own.
if BACKEND == "postgres" and os.environ.get("JOBS_TEST_CLUSTER2_NAME"):
    DATABASES["jobs_cluster2"] = {
        **DATABASES["default"],
        "PORT": int(os.environ.get("JOBS_TEST_CLUSTER2_PORT", "5435")),
        "NAME": os.environ["JOBS_TEST_CLUSTER2_NAME"],
        "TEST": {"NAME": os.environ["JOBS_TEST_CLUSTER2_NAME"]},
    }
_routes = dict(pair.split("=", 1) for pair in os.environ.get("JOBS_TEST_QUEUE_DATABASES", "").split(",") if pair)

# PgBouncer (tests/support/pgbouncer.py, tests/process/test_pgbouncer.py): a process started with
# JOBS_TEST_POOLER_PORT (a worker, a `jobs doctor`, a shell that enqueues) runs its "default" through
# that pooler, with "direct" beside it (for LISTEN_DATABASES); "prepare_threshold": None unless
# JOBS_TEST_POOLER_PREPARE=1 (psycopg's prepared statements on, as Django opens it by default).
if BACKEND == "postgres" and _joined and os.environ.get("JOBS_TEST_POOLER_PORT"):
    DATABASES["direct"] = dict(DATABASES["default"])
    DATABASES["default"] = {**DATABASES["default"], "PORT": int(os.environ["JOBS_TEST_POOLER_PORT"])}
    if os.environ.get("JOBS_TEST_POOLER_PREPARE") != "1":
        DATABASES["default"]["OPTIONS"] = {"prepare_threshold": None}
_listen = dict(pair.split("=", 1) for pair in os.environ.get("JOBS_TEST_LISTEN_DATABASES", "").split(",") if pair)

ULTIMATE_JOBS = {
    **({"QUEUE_DATABASES": _routes} if _routes else {}),
    "VISIBILITY_TIMEOUT": os.environ.get("JOBS_TEST_VISIBILITY", "30s"),
    "CLAIM_LEASE": os.environ.get("JOBS_TEST_CLAIM_LEASE", "30s"),
    **({"LISTEN_DATABASES": _listen} if _listen else {}),
    "WAKE_PROBE_INTERVAL": os.environ.get("JOBS_TEST_WAKE_PROBE_INTERVAL", "60s"),
    "POLL_INTERVAL": os.environ.get("JOBS_TEST_POLL_INTERVAL", "50ms"),
    "IDLE_POLL_MAX": os.environ.get("JOBS_TEST_IDLE_POLL_MAX", "200ms"),
}

# Django's Tasks framework on this project's backend (tests/integration/contrib_tasks/): every
# worker of the suite also claims the django_tasks job.
TASKS = {
    "default": {"BACKEND": "ultimate_jobs.contrib.tasks.UltimateJobsBackend",
                "QUEUES": ["default", "emails", "queue-1"]},
}

LOGGING_CONFIG = None
