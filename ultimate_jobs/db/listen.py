"""Internal: the wake-up listener: ``LISTEN`` on one dedicated PostgreSQL connection.

An enqueue's ``pg_notify`` (payload: the queue name) reaches an idle worker at once; the poll
stays the guarantee. The connection is its own psycopg connection, never one of Django's, so a
long ``notifies()`` wait never holds a connection a job body needs. When it drops, the thread
logs ``jobs.listen.lost``, re-dials with backoff, and wakes the worker so a poll covers the gap.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import psycopg
from django.db import connections
from psycopg import sql

from ultimate_jobs.db.store import JOBS_CHANNEL

log = logging.getLogger("ultimate_jobs")


STOP_CHECK = 0.1  # seconds between looks at the stop flag while no notification arrives


class Listener:
    """Calls ``on_wake(queue)`` for each notification on ``channel``: ``ultimate_jobs`` (jobs
    inserted, for workers) or ``ultimate_jobs_outbox`` (rows staged, for relays)."""

    def __init__(self, alias: str, queues: Iterable[str], on_wake: Callable[[str], None],
                 channel: str = JOBS_CHANNEL) -> None:
        self.alias = alias
        self.queues = set(queues)
        self.on_wake = on_wake
        self.channel = channel
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ultimate-jobs-listen", daemon=True)
        self.connected = threading.Event()
        self._conn: psycopg.Connection[Any] | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self, wait: float = 5.0) -> None:
        """Stop listening; wait up to ``wait`` seconds for the connection to close, so a process
        (or a test database being dropped) is not left with a session behind it."""
        self._stop.set()
        conn = self._conn
        if conn is not None:
            try:
                conn.cancel()
            except Exception:  # a dead connection cannot be cancelled; the thread exits on its own
                pass
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(wait)

    def _dial(self) -> psycopg.Connection[Any]:
        params = connections[self.alias].get_connection_params()
        params.pop("cursor_factory", None)
        params.pop("context", None)
        params.pop("server_side_binding", None)
        params.pop("prepare_threshold", None)
        return psycopg.connect(autocommit=True, **params)

    def _run(self) -> None:
        backoff = 0.1
        while not self._stop.is_set():
            try:
                conn = self._conn = self._dial()
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
                self.connected.set()
                backoff = 0.1
                self.on_wake("")  # a poll covers whatever was sent while nobody listened
                while not self._stop.is_set():
                    # A cancel does not interrupt notifies(): the timeout is what bounds stop(),
                    # and so how long a --burst worker takes to return after its last job.
                    for note in conn.notifies(timeout=STOP_CHECK):
                        if not self.queues or note.payload in self.queues or not note.payload:
                            self.on_wake(note.payload)
            except Exception as exc:  # the listener must outlive any connection failure
                self.connected.clear()
                if self._stop.is_set():
                    break
                log.warning("jobs.listen.lost error=%r retry_in=%.1fs", exc, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)
            finally:
                dialled, self._conn = self._conn, None
                if dialled is not None:
                    try:
                        dialled.close()
                    except Exception:  # closing a broken connection may fail; nothing to keep
                        pass
        self.connected.clear()


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.01) -> bool:
    """Poll ``predicate`` until true or ``timeout`` seconds pass (tests and shutdown)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()
