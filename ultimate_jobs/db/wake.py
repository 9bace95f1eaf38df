"""Internal: the sending side of the wake-up — at most one NOTIFY per queue per ``WAKE_WINDOW`` per
process, and a wake the window withholds sent when the window ends.

Usage (``enqueue.submit``)::

    now, later = WAKES.due(store.alias, JOBS_CHANNEL, {"emails"}, window=0.01)
    store.job_insert_many(rows=..., notify=now, ...)   # the insert's own NOTIFY, at its commit
    WAKES.owe(store.alias, JOBS_CHANNEL, later)        # after the write: sent when the window ends

The first write to a queue in a window carries its NOTIFY in the write's own transaction (a
rolled-back enqueue wakes nobody). A write inside the window is not left to the workers' idle poll
(hundreds of ms): the queue is owed a wake, and one ``ultimate-jobs-wake`` thread sends it when the
window ends, on its own connection. That connection stays open while owed wakes keep coming (a
steady stream of enqueues owes one every window, and a new session each time would cost a backend
start per window: docs/scaling.md) and is closed after ``LINGER`` seconds without one, so
an idle web process keeps no extra session, and a test database dropped after the last enqueue is
not held: PostgreSQL's DROP DATABASE waits up to 5 s for other sessions to leave. So a burst costs
one NOTIFY per queue per window, and commit-to-pickup stays bounded by the window. A
deferred wake can reach a worker before a staged row's transaction commits (a transaction open past
the window); the poll, always the guarantee, covers that. SQLite has no NOTIFY: every write answers
its queues and nothing is owed.

Logged events: ``jobs.wake.failed``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable

from django.db import connections

log = logging.getLogger("ultimate_jobs")

LINGER = 1.0  # seconds the wake thread keeps a connection open after its last owed wake


class WakeWindow:
    """The per-process wake window: which queues a write wakes now, and the owed wakes' sender."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._last: dict[tuple[str, str, str], float] = {}  # (alias, channel, queue) -> last wake sent
        self._owed: dict[tuple[str, str, str], float] = {}  # -> when the window ends and it is sent
        self._thread: threading.Thread | None = None
        self._open: set[str] = set()  # aliases whose connection the wake thread holds open
        self._vendors: dict[str, str] = {}  # alias -> database vendor, read once (every enqueue asks)

    def due(self, alias: str, channel: str, queues: Iterable[str], window: float) -> tuple[list[str], list[str]]:
        """Answer (the queues a write to ``alias`` wakes in its own transaction, the queues its window
        withholds): pass the second to ``owe`` once the write is done."""
        vendor = self._vendors.get(alias)
        if vendor is None:
            vendor = self._vendors[alias] = connections[alias].vendor
        if vendor != "postgresql":
            return list(queues), []
        now = time.monotonic()
        due, later = [], []
        with self._lock:
            for queue in queues:
                key = (alias, channel, queue)
                last = self._last.get(key)
                if last is None or now - last >= window:
                    self._last[key] = now
                    self._owed.pop(key, None)  # this write's own NOTIFY covers it
                    due.append(queue)
                else:
                    later.append(queue)
        return due, later

    def owe(self, alias: str, channel: str, queues: list[str], window: float) -> None:
        """After the write: wake ``queues`` when their window ends (at once if it ended meanwhile).
        Registered only now, so a direct write has committed before its deferred wake can go."""
        if not queues:
            return
        now = time.monotonic()
        with self._lock:
            added = False
            for queue in queues:
                key = (alias, channel, queue)
                if key not in self._owed:
                    self._owed[key] = max(now, self._last.get(key, now) + window)
                    added = True
            self._start()
            # Only a newly owed wake can move the thread's next deadline: waking it for one it
            # already holds cost a thread switch on most of a burst's enqueues.
            if added:
                self._lock.notify()

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="ultimate-jobs-wake", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._owed:
                    if not self._lock.wait(LINGER if self._open else None) and not self._owed:
                        self._close()  # LINGER passed without an owed wake
                now = time.monotonic()
                first = min(self._owed.values())
                if first > now:
                    self._lock.wait(first - now)
                    continue
                sent = [key for key, at in self._owed.items() if at <= now]
                for key in sent:
                    del self._owed[key]
                    self._last[key] = now  # the owed wake is this window's one
            self._send(sent)

    def _close(self) -> None:
        for alias in self._open:
            connections[alias].close()
        self._open.clear()

    def _send(self, keys: list[tuple[str, str, str]]) -> None:
        from ultimate_jobs.db import store_for  # the stores load on first use

        groups: dict[tuple[str, str], list[str]] = {}
        for alias, channel, queue in keys:
            groups.setdefault((alias, channel), []).append(queue)
        for (alias, channel), queues in groups.items():
            # A kept session may have been cut while it idled (a server restart, an idle timeout):
            # its wake gets one more try on a new session.
            tries = 2 if alias in self._open else 1
            for left in range(tries - 1, -1, -1):
                self._open.add(alias)
                try:
                    store_for(alias).queue_wake(queues=queues, channel=channel)
                    break
                except Exception as exc:  # a lost wake costs one idle poll, never the thread
                    connections[alias].close()  # a broken session is not kept
                    self._open.discard(alias)
                    if not left:
                        log.warning("jobs.wake.failed alias=%s queues=%s error=%r", alias, ",".join(queues), exc)


WAKES = WakeWindow()
