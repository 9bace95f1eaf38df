"""A real second PostgreSQL cluster for the tests of ``QUEUE_DATABASES`` across clusters: created
with ``pg_createcluster`` on port 5435 for the session, restartable by a test, dropped at the end.

The ``second_cluster`` fixture skips when ``pg_createcluster`` is not installed (Debian's
postgresql-common), unless ``REQUIRE_SECOND_CLUSTER=1`` (CI), which makes that a failure. It
never touches the suite's own cluster (5432). The database on it, ``uj_cluster2``, is migrated
once and reached as the ``jobs_cluster2`` alias of tests/settings.py (by the worker processes:
``SecondCluster.env``); the test process reads it with its own psycopg connection
(``SecondCluster.rows``), as pytest-django does not manage it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
ALIAS = "jobs_cluster2"
PORT = int(os.environ.get("JOBS_TEST_CLUSTER2_PORT", "5435"))
VERSION = os.environ.get("JOBS_TEST_CLUSTER2_VERSION", "15")
NAME = "uj_second"  # the cluster's name (pg_lsclusters)
DATABASE = "uj_cluster2"


def _run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, check=check, timeout=120)


def _exists() -> bool:
    return any(line.split()[:2] == [VERSION, NAME] for line in _run("pg_lsclusters", "--no-header").stdout.splitlines())


@dataclass
class SecondCluster:
    port: int
    database: str
    alias: str = ALIAS

    def env(self, routes: dict[str, str] | None = None) -> dict[str, str]:
        """What a worker process (or a ``manage.py`` command) needs to reach the cluster, with
        ``routes`` as its ``QUEUE_DATABASES`` (default: ``emails`` routed here)."""
        routes = {"emails": ALIAS} if routes is None else routes
        return {"JOBS_TEST_CLUSTER2_NAME": self.database, "JOBS_TEST_CLUSTER2_PORT": str(self.port),
                "JOBS_TEST_QUEUE_DATABASES": ",".join(f"{q}={a}" for q, a in routes.items())}

    def connect(self) -> Any:
        import psycopg

        return psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname=self.database,
                               autocommit=True, connect_timeout=3)

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """A query on the cluster's database, on a connection of its own (closed after it)."""
        with self.connect() as conn:
            cursor = conn.execute(sql, params)
            return list(cursor.fetchall()) if cursor.description else []

    def answers(self) -> bool:
        try:
            self.rows("SELECT 1")
        except Exception:  # not up (yet): the caller polls
            return False
        return True

    def stop(self) -> None:
        _run("pg_ctlcluster", "--skip-systemctl-redirect", VERSION, NAME, "stop", "-m", "fast")

    def start(self) -> None:
        _run("pg_ctlcluster", "--skip-systemctl-redirect", VERSION, NAME, "start")
        deadline = time.monotonic() + 30
        while not self.answers():
            if time.monotonic() > deadline:
                raise AssertionError(f"cluster {VERSION}/{NAME} did not answer within 30s after its start")
            time.sleep(0.05)

    def restart(self) -> None:
        _run("pg_ctlcluster", "--skip-systemctl-redirect", VERSION, NAME, "restart", "-m", "fast")


def _create() -> SecondCluster:
    if _exists():  # left behind by a run that was killed: start clean
        _run("pg_dropcluster", VERSION, NAME, "--stop", check=False)
    _run("pg_createcluster", VERSION, NAME, "--port", str(PORT), "--start", "--", "--auth=trust")
    cluster = SecondCluster(port=PORT, database=DATABASE)
    import psycopg

    deadline = time.monotonic() + 30
    while True:
        try:
            with psycopg.connect(host="127.0.0.1", port=PORT, user="postgres", dbname="postgres",
                                 autocommit=True, connect_timeout=3) as conn:
                conn.execute(f'CREATE DATABASE "{DATABASE}"')
            break
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JOBS_TEST_DB": "postgres", "JOBS_TEST_DB_NAME": "postgres",
           **cluster.env(routes={})}
    migrate = subprocess.run([sys.executable, "-m", "django", "migrate", "--database", ALIAS, "--skip-checks",
                              "--settings", "tests.settings", "-v", "0"], cwd=ROOT, env=env, capture_output=True,
                             text=True, timeout=300)
    if migrate.returncode:
        raise AssertionError(f"migrate on the second cluster failed:\n{migrate.stdout}\n{migrate.stderr}")
    return cluster


@pytest.fixture(scope="session")
def second_cluster() -> Iterator[SecondCluster]:
    """A second PostgreSQL cluster for this session (see the module docstring)."""
    if shutil.which("pg_createcluster") is None:
        if os.environ.get("REQUIRE_SECOND_CLUSTER") == "1":
            pytest.fail("REQUIRE_SECOND_CLUSTER=1 but pg_createcluster is not installed (Debian's "
                        "postgresql-common); install it or unset REQUIRE_SECOND_CLUSTER.")
        pytest.skip("pg_createcluster is not installed: the second-cluster tests need Debian's postgresql-common")
    cluster = _create()
    try:
        yield cluster
    finally:
        _run("pg_dropcluster", VERSION, NAME, "--stop", check=False)
