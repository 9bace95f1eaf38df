"""Internal: the time source every deadline reads.

In production ``sql_now()`` is ``None`` and SQL spells ``coalesce(%(now)s, now())``, so the
database's clock decides and workers with skewed clocks agree. A test freezes the clock
(``ultimate_jobs.testing.FrozenClock``) and its time reaches SQL through the same parameter.
SQLite has no shared server clock, so its store always passes ``now()``.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ultimate_jobs.context import CancelToken

_frozen: datetime | None = None
# The pauses taken on the frozen clock since it was frozen (``FrozenClock.pauses``): a test asserts
# what was asked for instead of spending it.
_pauses: list[float] = []


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
    if _frozen is None or at is None:
        _pauses.clear()
    _frozen = at.astimezone(UTC) if at is not None else None


def advance(by: timedelta | float) -> datetime:
    global _frozen
    if _frozen is None:
        raise RuntimeError("advance() needs a frozen clock")
    _frozen = _frozen + (by if isinstance(by, timedelta) else timedelta(seconds=by))
    return _frozen


def is_frozen() -> bool:
    return _frozen is not None


def monotonic() -> float:
    """Seconds on a clock that never goes back: the frozen time when one is set."""
    return _frozen.timestamp() if _frozen is not None else time.monotonic()


def pause(seconds: float, token: CancelToken) -> bool:
    """Wait ``seconds`` unless ``token`` is cancelled first; answer False when it was cancelled.

    On a frozen clock the wait is not spent: the clock moves forward by it and the pause is
    recorded, the way the test helpers move the clock over a retry's delay.
    """
    if token.is_set():
        return False
    if _frozen is not None:
        _pauses.append(seconds)
        advance(seconds)
        return True
    return not token.wait(seconds)


def pauses() -> list[float]:
    """The pauses taken on the frozen clock since it was frozen, in order."""
    return list(_pauses)
