"""Internal: ``ctx.progress(done, total=None, note=None)``, throttled to one write a second.

The newest report is always written before the run settles (``flush``, or ``aflush`` for an
``async def`` body), so the row ends with the last progress the body gave. Writes are fenced on
the claim like every worker write; a cancelled run writes nothing; a write that finds the run
taken sets ``ctx.cancelled`` (``X_JOB_LEASE_LOST``). A database error on a progress write is
logged (``jobs.progress.failed``) and never fails the run. A report made on an event loop (an
``async def`` body) is written off the loop (``runtime.aio.off_loop``) and answers a ``Reported``
the body may await; anywhere else the write is made on the calling thread.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any

from django.db import DatabaseError

from ultimate_jobs import clock, jsoncodec
from ultimate_jobs.context import Reported
from ultimate_jobs.errors import X_JOB_LEASE_LOST, X_PROGRESS_INVALID, JobsError
from ultimate_jobs.runtime.aio import finished, off_loop

if TYPE_CHECKING:
    from ultimate_jobs.context import CancelToken
    from ultimate_jobs.db.store import ClaimedJob, Store

log = logging.getLogger("ultimate_jobs")

INTERVAL = 1.0  # seconds between two progress writes of one run
MAX_NOTE_CHARS = 500


def _number(value: object, what: str) -> float | int:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise JobsError(X_PROGRESS_INVALID, f"ctx.progress: {what}={value!r} must be a finite number >= 0.")
    return value


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class Progress:
    """One attempt's progress reporter (``ctx.progress``); ``executor`` is where an ``async def``
    body's writes run (None: asgiref's thread-sensitive thread)."""

    def __init__(self, *, store: Store, claimed: ClaimedJob, token: CancelToken,
                 executor: Executor | None = None) -> None:
        self.store = store
        self.claimed = claimed
        self.token = token
        self.executor = executor
        self._last = -math.inf
        self._pending: dict[str, Any] | None = None
        self._writes: list[asyncio.Future[None]] = []

    def report(self, done: Any, total: Any = None, note: Any = None) -> Reported:
        value: dict[str, Any] = {"done": _number(done, "done"),
                                 "total": None if total is None else _number(total, "total"), "note": None}
        if note is not None:
            if not isinstance(note, str):
                raise JobsError(X_PROGRESS_INVALID, f"ctx.progress: note={note!r} must be a string.")
            value["note"] = note[:MAX_NOTE_CHARS].replace("\x00", "")
        self._pending = value
        if time.monotonic() - self._last >= INTERVAL:
            return self._send()
        return Reported()

    __call__ = report  # JobContext.progress calls its hook directly

    def flush(self) -> None:
        """Write the newest unwritten report on this thread (before a ``def`` body's run settles)."""
        if self._pending is not None:
            self._send()

    async def aflush(self) -> None:
        """Write the newest unwritten report off the loop and wait for every write this attempt
        started (before an ``async def`` body's run settles)."""
        if self._pending is not None:
            self._send()
        await self.landed()

    async def landed(self) -> None:
        """Wait for the writes already started off the loop."""
        while self._writes:
            await finished(self._writes.pop())

    def _send(self) -> Reported:
        value, self._pending = self._pending, None
        self._last = time.monotonic()
        if value is None or self.token.is_set():
            return Reported()  # a cancelled run writes nothing
        loop = _running_loop()
        if loop is None:
            self._write(value)
            return Reported()
        for done in [w for w in self._writes if w.done()]:
            self._writes.remove(done)
            if not done.cancelled():
                done.exception()  # retrieved: _write logs its own failures
        previous = self._writes[-1] if self._writes else None
        write = loop.create_task(self._after(previous, value))
        self._writes.append(write)
        return Reported(write)

    async def _after(self, previous: asyncio.Future[None] | None, value: dict[str, Any]) -> None:
        # The worker's executor has many threads: two writes in flight could land out of order and
        # leave an older report on the row, so each write starts once the one before it ended.
        if previous is not None:
            await finished(previous)
        await off_loop(self.executor, self._write, value)

    def _write(self, value: dict[str, Any]) -> None:
        try:
            landed = self.store.job_progress(job_id=self.claimed.id, claim=self.claimed.claim,
                                             progress=jsoncodec.dumps(value, what="progress"), now=clock.sql_now())
        except DatabaseError as exc:  # progress is a report, never a reason to fail the run
            log.warning("jobs.progress.failed job_id=%s error=%r", self.claimed.id, exc)
            return
        if not landed and self.token.set(X_JOB_LEASE_LOST, "A progress write found the job no longer running "
                                                           "under this attempt's claim."):
            log.warning("jobs.lease.lost job_id=%s name=%s: fenced out of a progress write", self.claimed.id,
                        self.claimed.name)
