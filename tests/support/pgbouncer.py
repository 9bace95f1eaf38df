"""A real PgBouncer in front of the suite's PostgreSQL (Debian's ``pgbouncer``), for the pooler tests.

Usage::

    with PgBouncer(port=TRANSACTION_PORT, pool_mode="transaction") as bouncer:
        psycopg.connect(host="127.0.0.1", port=bouncer.port, user="postgres", dbname="...")

The fixtures ``pgbouncer`` (transaction mode on ``TRANSACTION_PORT``) and ``pgbouncer_session``
(session mode on ``SESSION_PORT``) start one per test module and stop after it, so the pool's
server sessions do not outlive the module (another test counting ``pg_stat_activity`` would see
them). PgBouncer refuses to run as root: as root it is started as the ``postgres`` user, its
config, auth file and log in a temporary directory that user owns. Without ``pgbouncer``
installed the tests that ask for it are skipped, unless ``REQUIRE_PGBOUNCER=1`` (CI), which
fails them instead.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import psycopg
import pytest

TRANSACTION_PORT = 6433
SESSION_PORT = 6434
SERVER_HOST, SERVER_PORT = "127.0.0.1", 5432
POOL_SIZE = 40


def pgbouncer_binary() -> str | None:
    found = shutil.which("pgbouncer")
    if found:
        return found
    return "/usr/sbin/pgbouncer" if os.access("/usr/sbin/pgbouncer", os.X_OK) else None


class PgBouncer:
    """One PgBouncer process: ``*`` (every database) forwarded to the suite's PostgreSQL, trust auth."""

    def __init__(self, *, port: int, pool_mode: str) -> None:
        binary = pgbouncer_binary()
        if binary is None:
            raise RuntimeError("pgbouncer is not installed (apt-get install pgbouncer)")
        self.binary, self.port, self.pool_mode = binary, port, pool_mode
        self.dir = Path(tempfile.mkdtemp(prefix=f"uj-pgbouncer-{port}-"))
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.dir / "pgbouncer.log"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def start(self) -> PgBouncer:
        ini = self.dir / "pgbouncer.ini"
        (self.dir / "userlist.txt").write_text('"postgres" ""\n')
        ini.write_text(f"""[databases]
* = host={SERVER_HOST} port={SERVER_PORT}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.port}
unix_socket_dir =
auth_type = trust
admin_users = postgres
auth_file = {self.dir / 'userlist.txt'}
pool_mode = {self.pool_mode}
default_pool_size = {POOL_SIZE}
max_client_conn = 500
logfile = {self.log_path}
pidfile = {self.dir / 'pgbouncer.pid'}
ignore_startup_parameters = extra_float_digits,options
""")
        user: dict[str, Any] = {}
        if os.geteuid() == 0:  # "PgBouncer should not run as root"
            owner = pwd.getpwnam("postgres")
            for path in (self.dir, *self.dir.iterdir()):
                os.chown(path, owner.pw_uid, owner.pw_gid)
            user = {"user": owner.pw_uid, "group": owner.pw_gid, "extra_groups": []}
        self.proc = subprocess.Popen([self.binary, str(ini)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.STDOUT, **user)
        deadline = time.monotonic() + 15
        while True:
            try:
                psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="postgres",
                                connect_timeout=2).close()
                return self
            except psycopg.OperationalError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"pgbouncer on port {self.port} did not start:\n{self.log()}") from None
                time.sleep(0.1)

    def server_pids(self, dbname: str) -> list[int]:
        """The pids of the server sessions the pool holds for ``dbname`` now (the admin console's
        ``SHOW SERVERS``), busy or idle."""
        with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="pgbouncer",
                             autocommit=True, prepare_threshold=None) as admin:
            cursor = admin.execute("SHOW SERVERS")
            names = [column.name for column in cursor.description or ()]
            rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
        return [int(row["remote_pid"]) for row in rows if row["database"] == dbname]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> PgBouncer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def _bouncer(port: int, pool_mode: str) -> Iterator[PgBouncer]:
    if pgbouncer_binary() is None:
        if os.environ.get("REQUIRE_PGBOUNCER") == "1":
            pytest.fail("REQUIRE_PGBOUNCER=1 but pgbouncer is not installed (apt-get install pgbouncer)")
        pytest.skip("pgbouncer is not installed (REQUIRE_PGBOUNCER=1 makes this a failure)")
    with PgBouncer(port=port, pool_mode=pool_mode) as bouncer:
        yield bouncer


# Both ask for django_db_setup so they stop before the test databases are dropped: a pooler's
# server sessions would hold them open.
@pytest.fixture(scope="module")
def pgbouncer(django_db_setup: None) -> Iterator[PgBouncer]:
    """A PgBouncer in transaction mode on ``TRANSACTION_PORT`` for one test module."""
    yield from _bouncer(TRANSACTION_PORT, "transaction")


@pytest.fixture(scope="module")
def pgbouncer_session(django_db_setup: None) -> Iterator[PgBouncer]:
    """A PgBouncer in session mode on ``SESSION_PORT`` for one test module."""
    yield from _bouncer(SESSION_PORT, "session")
