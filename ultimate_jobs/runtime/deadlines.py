"""Internal: the deadline rule, shared by the worker's loop and the test runner.

A run's ``timeout`` and its current step's ``step_timeout`` (``ctx.step.run`` publishes its
deadline on the cancel token while it runs) are checked off the body's thread: the token is set
*first*, so the body's later step writes are refused, and only then is the attempt failed — with
the verdict ``timed_out_outcome`` decides here, never the body's own.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from django.db import DatabaseError

from ultimate_jobs.context import CancelToken
from ultimate_jobs.errors import X_JOB_TIMEOUT
from ultimate_jobs.runtime import on_settled
from ultimate_jobs.runtime.compensation import defer
from ultimate_jobs.runtime.execute import decide

if TYPE_CHECKING:
    from ultimate_jobs.db.store import ClaimedJob
    from ultimate_jobs.handle import AnyJobHandle
    from ultimate_jobs.runtime.outcome import Outcome

log = logging.getLogger("ultimate_jobs")


def expired(claimed: ClaimedJob, handle: AnyJobHandle, token: CancelToken, deadline: float | None, now: float) -> bool:
    """Whether the attempt passed ``deadline`` (its ``timeout``, on ``time.monotonic()``) or its
    current step its ``step_timeout``; if so the token is set (``X_JOB_TIMEOUT``) before answering."""
    step_deadline, step_name = token.step_deadline, token.step_name
    if deadline is not None and now >= deadline:
        token.set(X_JOB_TIMEOUT, f"{claimed.name} passed its timeout of {handle.timeout:g}s.")
        return True
    if step_deadline is not None and now >= step_deadline:
        token.set(X_JOB_TIMEOUT, f"{claimed.name}: step {step_name!r} passed its step_timeout of "
                  f"{handle.step_timeout:g}s.")
        return True
    return False


def timed_out_outcome(handle: AnyJobHandle, claimed: ClaimedJob, token: CancelToken, store: Any) -> Outcome:
    """How a timed-out attempt settles: the retry decision on its ``X_JOB_TIMEOUT``; for a
    ``compensates=True`` job that fails for good, the unwind handed to the next claim; and the
    ``on_settled`` delivery attached."""
    outcome = decide(handle, claimed, CancelToken(), error=token.error())
    assert outcome is not None  # decided on a fresh token: only a set one makes decide answer None
    try:
        outcome = defer(handle, claimed, store, outcome)
    except DatabaseError as exc:  # no marker: the next claim still unwinds once the forward attempts are spent
        log.warning("jobs.compensation.defer-failed job_id=%s error=%r", claimed.id, exc)
    return on_settled.attach(handle, claimed, outcome)
