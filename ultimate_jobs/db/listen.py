"""Internal: the wake-up listener: ``LISTEN`` on one dedicated PostgreSQL connection, and the probe
that proves it hears.

An enqueue's ``pg_notify`` (payload: the queue name) reaches an idle worker at once; the poll
stays the guarantee. The connection is its own psycopg connection, never one of Django's, so a
long ``notifies()`` wait never holds a connection a job body needs. It is dialled on the alias
``LISTEN_DATABASES`` names for the jobs alias (the jobs alias itself by default): LISTEN needs a
server session of its own, which a transaction-mode pooler does not give. When it drops, the
thread logs ``jobs.listen.lost``, re-dials with backoff, and wakes the worker so a poll covers the gap.

The wake probe: at start and every ``WAKE_PROBE_INTERVAL`` the listener sends a NOTIFY on its own
channel through the jobs alias (a payload no queue name can be) and expects it on its LISTEN
connection within ``PROBE_TIMEOUT``. Not heard: ``jobs.wake.unverified`` (``verified`` is False
and the worker polls at ``POLL_INTERVAL``); heard: ``jobs.wake.live``. A LISTEN that went through a
pooler (the server session's pid is not the one the pooler handed out) and was not heard is given
up on that server session — ``UNLISTEN *`` sent there (``db.sessions.run_on_server_session``), so
the pool's next client gets no notification of ours — and tried again at the next probe. Every
LISTEN connection sends ``UNLISTEN *`` before it is closed. A pooled server session that cannot be
reached at that moment (another client holds it in a transaction) is tried again every
``RELEASE_RETRY`` until it is reached or closed, and for up to ``STOP_RELEASE`` more when the
listener stops; one still unreached then is logged (``jobs.listen.left-behind``).

Logged events: ``jobs.listen.lost``, ``jobs.wake.live``, ``jobs.wake.unverified``,
``jobs.wake.probe-failed`` (the probe could not be sent: the jobs database did not answer),
``jobs.listen.left-behind``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import psycopg
from psycopg import sql

from ultimate_jobs.db.sessions import (
    LISTEN_AND_PID,
    NOTIFY,
    UNLISTEN_ALL,
    UNLISTEN_AND_PID,
    dial,
    proxied,
    run_on_server_session,
    server_session_exists,
)
from ultimate_jobs.db.store import JOBS_CHANNEL

log = logging.getLogger("ultimate_jobs")


STOP_CHECK = 0.1  # seconds between looks at the stop flag while no notification arrives
PROBE_TIMEOUT = 1.0  # seconds a probe NOTIFY has to reach the LISTEN connection
PROBE_PREFIX = "#probe:"  # a probe's payload starts so; "#" is in no queue name
PROBE_CHANNEL = "ultimate_jobs_probe"  # the doctor's own probes: no worker listens there
DEFAULT_PROBE_INTERVAL = 60.0
RELEASE_RETRY = 1.0  # seconds between tries to reach a pooled server session still holding our LISTEN
STOP_RELEASE = 3.0  # seconds a stopping listener keeps trying to reach them
FIX = ("point ULTIMATE_JOBS['LISTEN_DATABASES'] at an alias that reaches this database directly or through "
       "a session-mode pool, e.g. {\"default\": \"default_direct\"}")


class Listener:
    """Calls ``on_wake(queue)`` for each notification on ``channel``: ``ultimate_jobs`` (jobs
    inserted, for workers) or ``ultimate_jobs_outbox`` (rows staged, for relays). ``verified`` is
    None until the first probe answers, then whether the last one was heard."""

    def __init__(self, alias: str, queues: Iterable[str], on_wake: Callable[[str], None],
                 channel: str = JOBS_CHANNEL, *, listen_alias: str | None = None,
                 probe_interval: float = DEFAULT_PROBE_INTERVAL) -> None:
        self.alias = alias
        self.listen_alias = listen_alias or alias
        self.queues = set(queues)
        self.on_wake = on_wake
        self.channel = channel
        self.probe_interval = probe_interval
        self.verified: bool | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ultimate-jobs-listen", daemon=True)
        self.connected = threading.Event()
        self._conn: psycopg.Connection[Any] | None = None
        self._left_on: set[int] = set()  # pooled server sessions our LISTEN is still registered on

    @property
    def unverified(self) -> bool:
        """The last probe was not heard: the wake cannot be relied on, poll."""
        return self.verified is False

    def start(self) -> None:
        self._thread.start()

    def stop(self, wait: float = STOP_RELEASE + 5.0) -> None:
        """Stop listening; wait up to ``wait`` seconds for the connection to close and the LISTEN
        to be given up, so a process (or a test database being dropped) is not left with a session
        behind it, nor a pool with a server session that still listens."""
        self._stop.set()
        conn = self._conn
        if conn is not None:
            try:
                conn.cancel()
            except Exception:  # a dead connection cannot be cancelled; the thread exits on its own
                pass
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(wait)

    def _run(self) -> None:
        backoff = 0.1
        while not self._stop.is_set():
            conn: psycopg.Connection[Any] | None = None
            pid: int | None = None
            try:
                conn = self._conn = dial(self.listen_alias)
                pid = listen(conn, self.channel)
                self.connected.set()
                backoff = 0.1
                self.on_wake("")  # a poll covers whatever was sent while nobody listened
                if not self._hear(conn, pid):
                    # Not heard through a pooler: the LISTEN is given up below; dialled again at the next probe.
                    self.connected.clear()
                    self._release(conn, pid)
                    conn = None
                    self._rest(self.probe_interval)
            except Exception as exc:  # the listener must outlive any connection failure
                self.connected.clear()
                if self._stop.is_set():
                    break
                log.warning("jobs.listen.lost error=%r retry_in=%.1fs", exc, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)
            finally:
                self._conn = None
                if conn is not None:
                    self._release(conn, pid)
        self.connected.clear()
        self._give_up_left_on(time.monotonic() + STOP_RELEASE)

    def _rest(self, seconds: float) -> None:
        """Wait ``seconds`` (cut short by ``stop()``), reaching the sessions still left on meanwhile."""
        until = time.monotonic() + seconds
        while not self._stop.is_set() and time.monotonic() < until:
            reach_idle_sessions(self.listen_alias, self._left_on)
            self._stop.wait(min(RELEASE_RETRY, max(0.0, until - time.monotonic())))

    def _give_up_left_on(self, deadline: float) -> None:
        reach_sessions_until(self.listen_alias, self._left_on, deadline)
        if self._left_on:
            log.warning("jobs.listen.left-behind listen_alias=%s channel=%s server_pids=%s: pooled server sessions "
                        "were busy until the listener stopped and still LISTEN; they hear our NOTIFYs until the "
                        "pooler closes them. Fix: %s.", self.listen_alias, self.channel, sorted(self._left_on), FIX)

    def _hear(self, conn: psycopg.Connection[Any], pid: int) -> bool:
        """Deliver notifications and probe until stopped (True), or until a probe through a pooler
        went unheard (False: this LISTEN is no use and is given up)."""
        next_probe = time.monotonic()
        pending: tuple[str, float] | None = None  # the probe's payload, and when it is given up
        next_reach = time.monotonic()
        while not self._stop.is_set():
            if pending is None and time.monotonic() >= next_probe:
                token = self._send_probe()
                if token is None:
                    next_probe = time.monotonic() + min(self.probe_interval, 5.0)
                else:
                    pending = (token, time.monotonic() + PROBE_TIMEOUT)
            # A cancel does not interrupt notifies(): the timeout is what bounds stop(),
            # and so how long a --burst worker takes to return after its last job.
            if self._left_on and time.monotonic() >= next_reach:
                reach_idle_sessions(self.listen_alias, self._left_on)
                next_reach = time.monotonic() + RELEASE_RETRY
            for note in conn.notifies(timeout=STOP_CHECK):
                if note.payload.startswith(PROBE_PREFIX):
                    if pending is not None and note.payload == pending[0]:
                        pending = None
                        next_probe = time.monotonic() + self.probe_interval
                        self._verdict(True, pid, conn)
                elif not self.queues or note.payload in self.queues or not note.payload:
                    self.on_wake(note.payload)
            if pending is not None and time.monotonic() >= pending[1]:
                pending = None
                next_probe = time.monotonic() + self.probe_interval
                self._verdict(False, pid, conn)
                if proxied(conn, pid):
                    return False
        return True

    def _send_probe(self) -> str | None:
        """NOTIFY a probe through the jobs alias; answer its payload (None: it could not be sent)."""
        token = PROBE_PREFIX + os.urandom(8).hex()
        try:
            with dial(self.alias) as sender:
                sender.execute(NOTIFY, (self.channel, token))
        except Exception as exc:  # the jobs database is away: the claim loop says so; probe again later
            log.info("jobs.wake.probe-failed alias=%s error=%r", self.alias, exc)
            return None
        return token

    def _verdict(self, heard: bool, pid: int, conn: psycopg.Connection[Any]) -> None:
        if heard:
            if self.verified is not True:
                log.info("jobs.wake.live alias=%s listen_alias=%s channel=%s: a probe NOTIFY was heard",
                         self.alias, self.listen_alias, self.channel)
            self.verified = True
            return
        if self.verified is not False:
            through = (" (the LISTEN went through a transaction-mode pooler, which hands its server sessions "
                       "to other clients between transactions)") if proxied(conn, pid) else ""
            log.warning("jobs.wake.unverified alias=%s listen_alias=%s channel=%s: a probe NOTIFY sent through "
                        "%r was not heard on the LISTEN connection within %.0fs%s; polling every POLL_INTERVAL "
                        "meanwhile. Fix: %s.", self.alias, self.listen_alias, self.channel, self.alias,
                        PROBE_TIMEOUT, through, FIX)
        self.verified = False

    def _release(self, conn: psycopg.Connection[Any], pid: int | None) -> None:
        """``UNLISTEN *`` on the server session the LISTEN went to, then close the connection. A
        pooled server session not reached now outlives our connection: it is tried again later."""
        if pid is None:
            self._close(conn)
            return
        pooled = not conn.closed and proxied(conn, pid)
        released = False
        try:
            if not conn.closed and not conn.broken:
                released = unlisten(conn, pid, self.listen_alias, shared=self.verified is not True)
        except Exception:  # a direct connection's session ends with it; a pooled one is tried again below
            pass
        self._close(conn)
        if pooled and not released:
            self._left_on.add(pid)

    @staticmethod
    def _close(conn: psycopg.Connection[Any]) -> None:
        try:
            conn.close()
        except Exception:  # closing a broken connection may fail; nothing to keep
            pass


def listen(conn: psycopg.Connection[Any], channel: str) -> int:
    """LISTEN on ``channel``; answer the pid of the server session that holds the LISTEN."""
    cursor = conn.execute(sql.SQL(LISTEN_AND_PID).format(sql.Identifier(channel)))
    cursor.nextset()
    row = cursor.fetchone()
    assert row is not None
    return int(row[0])


def unlisten(conn: psycopg.Connection[Any], pid: int, alias: str, *, shared: bool) -> bool:
    """``UNLISTEN *`` on the server session ``pid``; answer whether it was reached. A session of its
    own (or a session pool) is ``conn``'s; a LISTEN that went through a transaction-mode pooler
    (``shared``) is reached on the pool's server session it landed on, if it is idle now."""
    if not proxied(conn, pid) or not shared:
        conn.execute(UNLISTEN_ALL)
        return True
    cursor = conn.execute(UNLISTEN_AND_PID)
    cursor.nextset()
    row = cursor.fetchone()
    if row is not None and int(row[0]) == pid:
        return True
    return run_on_server_session(alias, pid, UNLISTEN_ALL)


def reach_idle_sessions(alias: str, pids: set[int]) -> None:
    """``UNLISTEN *`` on each of the pooled server sessions ``pids`` behind ``alias`` that is idle
    now; remove from ``pids`` those reached and those the pooler has closed."""
    for pid in sorted(pids):
        try:
            if run_on_server_session(alias, pid, UNLISTEN_ALL) or not server_session_exists(alias, pid):
                pids.discard(pid)
        except Exception:  # the pooler is away: its sessions are tried again later
            pass


def reach_sessions_until(alias: str, pids: set[int], deadline: float) -> None:
    """``reach_idle_sessions`` until ``pids`` is empty or the monotonic ``deadline`` passes."""
    while pids and time.monotonic() < deadline:
        reach_idle_sessions(alias, pids)
        if pids:
            time.sleep(STOP_CHECK)


def probe_wake(alias: str, listen_alias: str, timeout: float = PROBE_TIMEOUT) -> str | None:
    """One probe, as a listener makes it, on ``PROBE_CHANNEL``: LISTEN on ``listen_alias``, NOTIFY
    through ``alias``; answer None when heard within ``timeout``, else why not (``jobs doctor``)."""
    token = PROBE_PREFIX + os.urandom(8).hex()
    with dial(listen_alias) as conn:
        pid = listen(conn, PROBE_CHANNEL)
        through_pooler = proxied(conn, pid)
        heard = False
        try:
            with dial(alias) as sender:
                sender.execute(NOTIFY, (PROBE_CHANNEL, token))
            deadline = time.monotonic() + timeout
            while not heard and time.monotonic() < deadline:
                for note in conn.notifies(timeout=max(0.0, deadline - time.monotonic())):
                    if note.payload == token:
                        heard = True
                        break
        finally:
            if not unlisten(conn, pid, listen_alias, shared=not heard):
                reach_sessions_until(listen_alias, {pid}, time.monotonic() + STOP_RELEASE)
    if heard:
        return None
    through = " (it went through a transaction-mode pooler)" if through_pooler else ""
    return (f"a NOTIFY sent through {alias!r} was not heard within {timeout:.0f}s on a LISTEN over "
            f"{listen_alias!r}{through}: workers poll instead of waking. Fix: {FIX}.")


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.01) -> bool:
    """Poll ``predicate`` until true or ``timeout`` seconds pass (tests and shutdown)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()
