"""``Concurrency``: a job's fleet-wide cap on simultaneous runs, as ``@job(concurrency=...)`` takes it.

Usage::

    from ultimate_jobs import Concurrency, job

    @job(idempotency_key="sync:{account_id}", tenant="{account_id}",
         concurrency=Concurrency(key="{account_id}", limit=1, when_busy="wait"))
    def sync_account(ctx, *, account_id: str) -> None: ...

Options (default): ``limit`` (1), ``key`` (None: one cap for the whole job; else a format string
or ``callable(**input) -> str``), ``when_busy`` ("wait": handed back without burning an attempt;
"fail": settled ``failed`` with ``X_JOB_KEY_BUSY``). A bad value is ``X_JOB_DECLARATION_INVALID``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ultimate_jobs.errors import X_JOB_DECLARATION_INVALID, JobsError

WHEN_BUSY = ("wait", "fail")


@dataclass(frozen=True, slots=True, kw_only=True)
class Concurrency:
    """A fleet-wide cap: at most ``limit`` simultaneous runs (per ``key`` when given)."""

    limit: int = 1
    key: str | Callable[..., str] | None = None
    when_busy: str = "wait"

    def __post_init__(self) -> None:
        limit = self.limit
        if isinstance(limit, bool) or not isinstance(limit, int | float) or not (
            isinstance(limit, int) or (math.isfinite(limit) and limit.is_integer())
        ) or limit < 1:
            raise JobsError(X_JOB_DECLARATION_INVALID, f"concurrency limit={limit!r} must be a whole number >= 1.")
        object.__setattr__(self, "limit", int(limit))
        if self.key is not None and not (isinstance(self.key, str) and self.key) and not callable(self.key):
            raise JobsError(X_JOB_DECLARATION_INVALID, f"Concurrency(key={self.key!r}) must be a non-empty "
                            "format string or a callable(**input) -> str.")
        if self.when_busy not in WHEN_BUSY:
            raise JobsError(X_JOB_DECLARATION_INVALID, f"Concurrency(when_busy={self.when_busy!r}) is not "
                            '"wait" or "fail".')

    @classmethod
    def coerce(cls, value: Concurrency | int | None) -> Concurrency | None:
        if value is None:
            return None
        if isinstance(value, Concurrency):
            return value
        return cls(limit=value)
