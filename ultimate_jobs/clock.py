"""Internal: the time source every deadline reads.

In production ``sql_now()`` is ``None`` and SQL spells ``coalesce(%(now)s, now())``, so the
database's clock decides and workers with skewed clocks agree. A test freezes the clock
(``ultimate_jobs.testing.FrozenClock``) and its time reaches SQL through the same parameter.
SQLite has no shared server clock, so its store always passes ``now()``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

_frozen: datetime | None = None


def now() -> datetime:
    """The current time, aware UTC: the frozen test time when one is set."""
    return _frozen if _frozen is not None else datetime.now(UTC)


def sql_now() -> datetime | None:
    """The ``now`` parameter for PostgreSQL statements: ``None`` unless a test froze the clock."""
    return _frozen


def freeze(at: datetime | None) -> None:
    global _frozen
    if at is not None and at.tzinfo is None:
        raise ValueError("freeze() needs an aware datetime")
    _frozen = at.astimezone(UTC) if at is not None else None


def advance(by: timedelta | float) -> datetime:
    global _frozen
    if _frozen is None:
        raise RuntimeError("advance() needs a frozen clock")
    _frozen = _frozen + (by if isinstance(by, timedelta) else timedelta(seconds=by))
    return _frozen


def is_frozen() -> bool:
    return _frozen is not None
