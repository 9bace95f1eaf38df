"""Chaos tests: they restart the PostgreSQL server itself, so they run only on request.

Run them with ``make chaos`` (``JOBS_CHAOS=1 pytest tests/chaos -p no:randomly``); in ``make test``
every test here is skipped. They need a local PostgreSQL cluster managed by ``pg_ctlcluster``
(Debian's postgresql-common) and the right to restart it (root or the postgres user), and they
check that the database the suite talks to *is* that cluster before touching it.

The cluster restarted is the one serving the suite's database (``DATABASE_URL``, else
127.0.0.1:5432), found by its data directory under /etc/postgresql: by default ``15/main``, i.e.
``pg_ctlcluster --skip-systemctl-redirect 15 main restart -m immediate``. Restarting a server cuts
every session on it, other test runs' and benchmarks' included; on a shared machine give the
chaos tests a cluster of their own::

    pg_createcluster 15 chaos --port 5433 --start -- --auth=trust
    DATABASE_URL=postgres://postgres@127.0.0.1:5433/ultimate_jobs make chaos

Environment: ``JOBS_CHAOS=1`` (required); ``JOBS_CHAOS_CLUSTER`` / ``JOBS_CHAOS_PG_VERSION``
narrow the search (a mismatch skips rather than restarting another cluster).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.db import OperationalError, connection

from tests.conftest import BACKEND
from tests.process.conftest import started_worker  # noqa: F401 (the real-worker fixture, shared)

CONF = Path("/etc/postgresql")


def find_cluster(data_directory: str) -> tuple[str, str] | None:
    """The ``(version, name)`` under /etc/postgresql whose ``data_directory`` is this one."""
    wanted_version = os.environ.get("JOBS_CHAOS_PG_VERSION")
    wanted_name = os.environ.get("JOBS_CHAOS_CLUSTER")
    for conf in sorted(CONF.glob("*/*/postgresql.conf")):
        version, name = conf.parent.parent.name, conf.parent.name
        if (wanted_version and version != wanted_version) or (wanted_name and name != wanted_name):
            continue
        if f"data_directory = '{data_directory}'" in conf.read_text():
            return version, name
    return None


@pytest.fixture(autouse=True)
def _chaos_only() -> None:
    if os.environ.get("JOBS_CHAOS") != "1":
        pytest.skip("chaos test: run with `make chaos` (JOBS_CHAOS=1); it restarts PostgreSQL")
    if BACKEND != "postgres":
        pytest.skip("chaos tests restart PostgreSQL; the suite runs on SQLite")


class Cluster:
    """The local cluster behind the suite's database, restartable with ``pg_ctlcluster``."""

    def __init__(self, version: str, name: str) -> None:
        self.version, self.name = version, name

    def restart(self) -> float:
        """``pg_ctlcluster ... restart -m immediate`` (a crash and recovery); answer how long it took."""
        begin = time.monotonic()
        subprocess.run(["pg_ctlcluster", "--skip-systemctl-redirect", self.version, self.name, "restart",
                        "-m", "immediate"], check=True, capture_output=True, timeout=120)
        return time.monotonic() - begin

    @property
    def command(self) -> str:
        return f"pg_ctlcluster --skip-systemctl-redirect {self.version} {self.name} restart -m immediate"


def reconnecting(query: Callable[[], object], timeout: float = 60.0) -> object:
    """Run ``query`` on the test's own connection, re-dialling while the server is down."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return query()
        except OperationalError:
            connection.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@pytest.fixture
def cluster(transactional_db: None) -> Iterator[Cluster]:
    """The cluster serving the suite's database (found by its data directory); skip if none is ours."""
    if shutil.which("pg_ctlcluster") is None:
        pytest.skip("no pg_ctlcluster here: the chaos tests need a local Debian (postgresql-common) cluster")
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('data_directory')")
        data_directory = cursor.fetchone()[0]
    found = find_cluster(data_directory)
    if found is None:
        pytest.skip(f"the suite's database ({data_directory}) is not a cluster under {CONF}")
    yield Cluster(*found)
    reconnecting(lambda: connection.ensure_connection())  # teardown drops the test database
