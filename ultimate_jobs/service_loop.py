"""Internal: the loop shared by the worker, the outbox relay and the scheduler.

Each service plugs its pass in (``ServiceLoop.run(tick)``); the loop owns what the three used to
copy: SIGTERM/SIGINT (the first calls the service's ``on_signal``, a second its
``on_second_signal``, which exits; the handlers found at start are restored on exit), the back-off
after a failed pass (``BACKOFF_FLOOR`` doubling to ``BACKOFF_CAP``), the wake-up listener, and
``burst`` (the first idle pass ends the loop).

A tick answers how long to wait before the next pass: ``0`` to pass again at once, a number of
seconds (``wake()`` and ``stop()`` cut the wait short; a drain's ``deadline`` bounds it), or
``None`` when the service is done. A tick that raises one of ``errors`` is handed to
``on_error(exc, delay)`` to log it, then the loop waits ``delay`` (cut short only by ``stop()``);
a tick that logged its own failure raises ``PassFailed``. After a failed pass the loop closes
every connection of its thread the failure left unusable, to whichever database
(``db.release_broken_connections``), so a restart, a failover or ``pg_terminate_backend`` of
any database the pass touched heals on the pass after the server answers again. The loop ends
once ``stop()`` was called, unless the service ``drains`` (the worker), whose tick then answers
``None`` when it is done.

A database error with a known cause (``errors.db_error_code``: a pooler's prepared-statement error
is ``X_DB_PREPARED_STATEMENTS``) is logged by ``classified()`` once per streak of failed passes as
``jobs.db.failing`` with its code and fix, not once per pass; the streak ends with a pass that succeeds.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any, Protocol

from ultimate_jobs import faults
from ultimate_jobs.db import release_broken_connections
from ultimate_jobs.errors import CODES, db_error_code

log = logging.getLogger("ultimate_jobs")

BACKOFF_FLOOR = 0.05  # seconds after the first failed pass, doubling per failure in a row
BACKOFF_CAP = 5.0
SIGNALS = (signal.SIGTERM, signal.SIGINT)


class PassFailed(Exception):
    """Raised by a tick whose pass failed and was logged already: the loop backs off."""


class Stoppable(Protocol):
    def stop(self) -> None: ...


class Backoff:
    """The wait after failed passes in a row: ``floor``, doubling per failure, at most ``cap``."""

    __slots__ = ("cap", "delay", "floor")

    def __init__(self, floor: float = BACKOFF_FLOOR, cap: float = BACKOFF_CAP) -> None:
        self.floor, self.cap = floor, cap
        self.delay = 0.0

    def failed(self) -> float:
        """One more failure in a row: answer the wait before the next pass."""
        self.delay = min(max(self.delay * 2, self.floor), self.cap)
        return self.delay

    def reset(self) -> None:
        self.delay = 0.0


class ServiceLoop:
    """One service's loop; see the module docstring."""

    def __init__(self, *, on_signal: Callable[[int], None], on_second_signal: Callable[[int], None],
                 burst: bool = False, drains: bool = False, backoff: Backoff | None = None) -> None:
        self.burst = burst
        self.drains = drains
        self.backoff = backoff or Backoff()
        self.deadline: float | None = None  # a drain's end (time.monotonic()): no wait runs past it
        self.signals = 0
        self.woken = threading.Event()
        self.stopping = threading.Event()
        self._on_signal = on_signal
        self._on_second_signal = on_second_signal
        self._streak: str | None = None  # the code of the classified error the failing passes share
        # The crash tests' fault spec is read as a service starts, so a bad one stops it before any claim.
        faults.load()

    def wake(self) -> None:
        """Cut the current wait short: the next pass runs now."""
        self.woken.set()

    def stop(self) -> None:
        """End the loop after the pass in flight (a draining service: once its tick says so)."""
        self.stopping.set()
        self.woken.set()

    def classified(self, exc: BaseException, *, role: str, alias: str) -> bool:
        """Whether ``exc`` is a database error with a known cause and fix; the first of a streak is
        logged here (``jobs.db.failing``), so the caller logs nothing more for it."""
        code = db_error_code(exc)
        if code is None:
            return False
        if self._streak != code:
            self._streak = code
            log.error("jobs.db.failing role=%s alias=%s code=%s error=%r fix: %s (logged once until a pass "
                      "succeeds)", role, alias, code, exc, CODES[code])
        return True

    def idle(self, wait: float) -> float | None:
        """What a tick that found nothing to do answers: the end with ``burst``, else ``wait``."""
        return None if self.burst else wait

    def wait(self, seconds: float) -> None:
        """Wait up to ``seconds`` (never past a drain's ``deadline``), woken by ``wake()``/``stop()``."""
        if self.deadline is not None and self.stopping.is_set():
            seconds = max(0.0, min(seconds, self.deadline - time.monotonic()))
        self.woken.wait(seconds)

    def run(self, tick: Callable[[], float | None], *, errors: tuple[type[Exception], ...] = (),
            on_error: Callable[[Exception, float], None] | None = None, install_signals: bool = True,
            listen: Callable[[], Stoppable | None] | None = None) -> None:
        """Pass until stopped or the tick answers ``None``. ``listen`` starts the wake-up listener
        (answering None when there is none); it is stopped on exit."""
        with self._signals_installed(install_signals):
            listener = listen() if listen is not None else None
            try:
                while self.drains or not self.stopping.is_set():
                    self.woken.clear()
                    try:
                        wait = tick()
                    except PassFailed:
                        release_broken_connections()
                        self._pause(self.backoff.delay)
                        continue
                    except errors as exc:
                        delay = self.backoff.failed()
                        if on_error is not None:
                            on_error(exc, delay)
                        release_broken_connections()
                        self._pause(delay)
                        continue
                    self.backoff.reset()
                    self._streak = None
                    if wait is None:
                        break
                    if wait > 0:
                        self.wait(wait)
            finally:
                if listener is not None:
                    listener.stop()

    def _pause(self, delay: float) -> None:
        """The back-off: cut short by ``stop()``; while draining (stopped already), slept out, up
        to the drain's deadline."""
        if self.stopping.is_set():
            time.sleep(min(delay, max(0.0, (self.deadline or 0.0) - time.monotonic())))
        else:
            self.stopping.wait(delay)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.signals += 1
        if self.signals > 1:
            self._on_second_signal(signum)
        else:
            self._on_signal(signum)

    @contextlib.contextmanager
    def _signals_installed(self, install: bool) -> Iterator[None]:
        previous: dict[signal.Signals, Any] = {}
        if install and threading.current_thread() is threading.main_thread():
            for signum in SIGNALS:
                previous[signum] = signal.signal(signum, self._handle)
        try:
            yield
        finally:
            for signum, handler in previous.items():
                if handler is not None:  # None: installed outside Python, nothing to put back
                    signal.signal(signum, handler)


class LoopedService:
    """What the worker, the relay and the scheduler share on top of their ``ServiceLoop``."""

    _loop: ServiceLoop

    @property
    def burst(self) -> bool:
        """Whether the loop ends at the first idle pass (settable until ``run()``)."""
        return self._loop.burst

    @burst.setter
    def burst(self, value: bool) -> None:
        self._loop.burst = value
