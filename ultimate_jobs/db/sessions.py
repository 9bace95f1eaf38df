"""Internal: what a PostgreSQL alias's connection stands on — a server session of its own, or a
pooler's server sessions shared between clients (PgBouncer, Supavisor, RDS Proxy in transaction mode).

Usage::

    conn = dial("default")                       # a psycopg connection with the alias's parameters
    pid = server_pid(conn)
    proxied(conn, pid)                           # True: a pooler or proxy sits between
    run_on_server_session("default", pid, UNLISTEN_ALL)   # reach that server session through the pooler
    server_session_exists("default", pid)        # False once the pooler closed it
    prepared_statements_problem("default")       # None, or why prepared statements break there

A pooler answers the startup with a cancel key of its own, so the pid a client was handed at
startup (``conn.info.backend_pid``) is not the pid of the server session its statements run on:
that is how a pooler is told from a direct connection without leaving anything on the server.
Behind a transaction-mode pooler a client's next transaction may run on any of the pool's server
sessions; the only way to reach one of them again is to hold transactions open on fresh clients
until one lands there (``run_on_server_session``): PgBouncer hands out its idle server sessions
last-in first-out, so in a quiet pool the first client gets the session used last. The search ends
when the pooler opens a new server session for one of them (every idle one was tried), or when one
waits ``SESSION_WAIT`` for a server session at all: a pool at its size limit, whose every session
the search may be holding, must not make the application's own clients (or the search) wait longer.
"""

from __future__ import annotations

import select
import time
from typing import Any, LiteralString

import psycopg
from django.db import connections
from psycopg import pq

from ultimate_jobs.errors import db_error_code

BACKEND_PID: LiteralString = "SELECT pg_backend_pid()"
# One simple query, sent without waiting: the transaction it opens holds the server session it lands on.
BEGIN_AND_SESSION_STARTED = (b"BEGIN; SELECT a.pid, extract(epoch FROM a.backend_start), extract(epoch FROM "
                             b"clock_timestamp()) FROM pg_stat_activity AS a WHERE a.pid = pg_backend_pid()")
LISTEN_AND_PID: LiteralString = "LISTEN {}; SELECT pg_backend_pid()"  # one simple query: one transaction
UNLISTEN_ALL: LiteralString = "UNLISTEN *"
UNLISTEN_AND_PID: LiteralString = "UNLISTEN *; SELECT pg_backend_pid()"
NOTIFY: LiteralString = "SELECT pg_notify(%s, %s)"
SESSION_EXISTS: LiteralString = "SELECT count(*) FROM pg_stat_activity AS a WHERE a.pid = %s"
DEALLOCATE_ALL: LiteralString = "DEALLOCATE ALL"
ONLY_WHEN_ASKED = 2**31 - 1  # a prepare_threshold no statement reaches by being run often
PIN_TRIES = 100  # at most this many fresh clients held in a transaction while looking for one server session
SESSION_WAIT = 0.25  # seconds a pinning client waits for the pooler to hand it a server session
PROBE_TRIES = 4


def dial(alias: str, *, autocommit: bool = True) -> psycopg.Connection[Any]:
    """A new psycopg connection with ``alias``'s parameters (never one of Django's), preparing nothing."""
    params = connections[alias].get_connection_params()
    for key in ("cursor_factory", "context", "server_side_binding", "prepare_threshold"):
        params.pop(key, None)
    return psycopg.connect(autocommit=autocommit, prepare_threshold=None, **params)


def server_pid(conn: psycopg.Connection[Any]) -> int:
    """The pid of the server session this statement ran on."""
    row = conn.execute(BACKEND_PID).fetchone()
    assert row is not None
    return int(row[0])


def proxied(conn: psycopg.Connection[Any], pid: int) -> bool:
    """Whether a pooler or proxy sits between ``conn`` and the server session ``pid`` it reached."""
    return conn.info.backend_pid != pid


def run_on_server_session(alias: str, pid: int, statement: LiteralString) -> bool:
    """Run ``statement`` on the server session ``pid`` behind ``alias``'s transaction-mode pooler:
    fresh clients each hold a transaction (so the pooler hands each another of its idle server
    sessions) until one lands on ``pid``. Answer whether one did: not when the pooler had to open a
    new server session (every idle one was tried: ``pid`` is busy or gone), had none to hand out
    within ``SESSION_WAIT``, or after ``PIN_TRIES``."""
    held: list[psycopg.Connection[Any]] = []
    search_began = None
    try:
        for _ in range(PIN_TRIES):
            client = dial(alias)
            held.append(client)
            row = _session_within(client, SESSION_WAIT)
            if row is None:
                return False
            got, started, now = row
            if got == pid:
                client.execute(statement)
                client.execute("COMMIT")
                return True
            if search_began is None:
                search_began = now
            elif started >= search_began:
                return False
        return False
    finally:
        for client in held:
            try:
                if client.pgconn.transaction_status == pq.TransactionStatus.INTRANS:
                    client.execute("ROLLBACK")
                client.close()
            except psycopg.Error:  # a client that cannot roll back is closed by the pooler anyway
                pass


def _session_within(client: psycopg.Connection[Any], seconds: float) -> tuple[int, float, float] | None:
    """Open a transaction on ``client`` (autocommit, so psycopg sends nothing of its own) and answer
    the server session it landed on — (pid, started, now) as epoch seconds — or None when the
    pooler handed it none within ``seconds`` (the caller closes the client, which leaves the queue)."""
    pgconn = client.pgconn
    pgconn.send_query(BEGIN_AND_SESSION_STARTED)
    deadline = time.monotonic() + seconds
    while True:
        pgconn.consume_input()
        if not pgconn.is_busy():
            break
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([pgconn.socket], [], [], left)[0]:
            return None
    row: tuple[int, float, float] | None = None
    while (result := pgconn.get_result()) is not None:
        if result.status == pq.ExecStatus.FATAL_ERROR:
            raise psycopg.OperationalError((result.error_message or b"").decode(errors="replace"))
        if result.status == pq.ExecStatus.TUPLES_OK and result.ntuples:
            pid, started, now = (result.get_value(0, col) or b"0" for col in range(3))
            row = (int(pid), float(started), float(now))
    return row


def server_session_exists(alias: str, pid: int) -> bool:
    """Whether the server session ``pid`` behind ``alias`` is still open."""
    with dial(alias) as conn:
        row = conn.execute(SESSION_EXISTS, (pid,)).fetchone()
    return row is not None and int(row[0]) > 0


def prepared_statements_problem(alias: str) -> str | None:
    """Why the store's prepared statements break on ``alias`` (a pooler that does not keep them
    across transactions), or None: nothing prepared, a session of its own, or a pooler that keeps
    them (PgBouncer 1.21+ with ``max_prepared_statements``).

    Proven, not guessed: a statement is prepared on one server session, that session is held by
    another client, and the statement is run again, so the pooler must carry it to another one. A
    prepared statement the failure leaves behind on the first session is deallocated there.
    """
    options = connections[alias].settings_dict.get("OPTIONS") or {}
    if "prepare_threshold" in options and options["prepare_threshold"] is None:
        return None
    try:
        return _prove_prepared(alias)
    except psycopg.Error as exc:  # the first statement met one another client left on its session
        if db_error_code(exc) is None:
            raise
        return _problem(alias, exc)


def _problem(alias: str, exc: BaseException) -> str:
    return (f"a statement prepared on one server session failed on another ({exc}): {alias!r} goes through a "
            "pooler that does not keep prepared statements across transactions")


def _prove_prepared(alias: str) -> str | None:
    with dial(alias) as conn:
        conn.prepare_threshold = ONLY_WHEN_ASKED
        first = _prepared_pid(conn)
        if not proxied(conn, first):
            return None
        for _ in range(PROBE_TRIES):
            with dial(alias, autocommit=False) as holder:
                held = server_pid(holder)  # holds that server session until the end of this block
                try:
                    again = _prepared_pid(conn)
                except psycopg.Error as exc:
                    if db_error_code(exc) is None:
                        raise
                    if held == first:
                        holder.execute(DEALLOCATE_ALL)
                    holder.rollback()
                    return _problem(alias, exc)
                holder.rollback()
            if again != first:
                return None  # carried to another server session: the pooler keeps them
    return None


def _prepared_pid(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute(BACKEND_PID, prepare=True).fetchone()
    assert row is not None
    return int(row[0])
