"""Internal: ``ctx.progress(done, total=None, note=None)``, throttled to one write a second.

The newest report is always written before the run settles (``flush``), so the row ends with the
last progress the body gave. Writes are fenced on the claim like every worker write; a cancelled
run writes nothing; a write that finds the run taken sets ``ctx.cancelled`` (``X_JOB_LEASE_LOST``).
A database error on a progress write is logged (``jobs.progress.failed``) and never fails the run.
``async def`` bodies hand their writes to one background thread (Django's ORM is sync-only).
"""

from __future__ import annotations

import concurrent.futures
import logging
import math
import threading
import time
from typing import TYPE_CHECKING, Any

from django.db import DatabaseError, connections

from ultimate_jobs import clock, jsoncodec
from ultimate_jobs.errors import X_JOB_LEASE_LOST, X_PROGRESS_INVALID, JobsError

if TYPE_CHECKING:
    from ultimate_jobs.context import CancelToken
    from ultimate_jobs.db.store import ClaimedJob, Store

log = logging.getLogger("ultimate_jobs")

INTERVAL = 1.0  # seconds between two progress writes of one run
MAX_NOTE_CHARS = 500
_async_writer: concurrent.futures.ThreadPoolExecutor | None = None
_writer_lock = threading.Lock()


def _writer() -> concurrent.futures.ThreadPoolExecutor:
    global _async_writer
    with _writer_lock:
        if _async_writer is None:
            _async_writer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="ultimate-jobs-progress")
        return _async_writer


def _number(value: object, what: str) -> float | int:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise JobsError(X_PROGRESS_INVALID, f"ctx.progress: {what}={value!r} must be a finite number >= 0.")
    return value


class Progress:
    """One attempt's progress reporter (``ctx.progress``)."""

    def __init__(self, *, store: Store, claimed: ClaimedJob, token: CancelToken, offload: bool = False) -> None:
        self.store = store
        self.claimed = claimed
        self.token = token
        self.offload = offload
        self._last = -math.inf
        self._pending: dict[str, Any] | None = None
        self._futures: list[concurrent.futures.Future[None]] = []

    def report(self, done: Any, total: Any = None, note: Any = None) -> None:
        value: dict[str, Any] = {"done": _number(done, "done"),
                                 "total": None if total is None else _number(total, "total"), "note": None}
        if note is not None:
            if not isinstance(note, str):
                raise JobsError(X_PROGRESS_INVALID, f"ctx.progress: note={note!r} must be a string.")
            value["note"] = note[:MAX_NOTE_CHARS].replace("\x00", "")
        self._pending = value
        if time.monotonic() - self._last >= INTERVAL:
            self._send()

    __call__ = report  # JobContext.progress calls its hook directly

    def flush(self) -> None:
        """Write the newest unwritten report (before the run settles)."""
        if self._pending is not None:
            self._send()
        for future in self._futures:
            future.result()
        self._futures.clear()

    def _send(self) -> None:
        value, self._pending = self._pending, None
        self._last = time.monotonic()
        if value is None or self.token.is_set():
            return  # a cancelled run writes nothing
        if self.offload:
            self._futures = [f for f in self._futures if not f.done()]
            self._futures.append(_writer().submit(self._write, value, close=True))
        else:
            self._write(value)

    def _write(self, value: dict[str, Any], *, close: bool = False) -> None:
        try:
            landed = self.store.job_progress(job_id=self.claimed.id, claim=self.claimed.claim,
                                             progress=jsoncodec.dumps(value, what="progress"), now=clock.sql_now())
        except DatabaseError as exc:  # progress is a report, never a reason to fail the run
            log.warning("jobs.progress.failed job_id=%s error=%r", self.claimed.id, exc)
            return
        finally:
            if close:  # the writer thread's connection is not held between runs
                connections[self.store.alias].close()
        if not landed and self.token.set(X_JOB_LEASE_LOST, "A progress write found the job no longer running "
                                                           "under this attempt's claim."):
            log.warning("jobs.lease.lost job_id=%s name=%s: fenced out of a progress write", self.claimed.id,
                        self.claimed.name)
