"""Internal: the frozen test clock behind ``freeze_clock``, the ``jobs_clock`` fixture and the runners.

Re-exported by ``ultimate_jobs.testing`` (``FrozenClock``, ``freeze_clock``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import datetime, timedelta

from ultimate_jobs import clock
from ultimate_jobs.durations import Duration, to_seconds


class FrozenClock:
    """The test clock every ultimate_jobs deadline reads (and every SQL ``now``)."""

    def now(self) -> datetime:
        return clock.now()

    def advance(self, by: Duration) -> datetime:
        """Move the frozen time forward by a duration (``"3d"``, a ``timedelta``, seconds)."""
        return clock.advance(timedelta(seconds=to_seconds(by, subject="advance", positive=False)))

    def set(self, at: datetime) -> datetime:
        clock.freeze(at)
        return clock.now()

    @property
    def pauses(self) -> list[float]:
        """The waits asked of this clock since it was frozen (a backfill's pacer), in seconds:
        on a frozen clock they are not spent, the time moves forward by them instead."""
        return clock.pauses()


@contextlib.contextmanager
def freeze_clock(at: datetime | None = None) -> Iterator[FrozenClock]:
    """Freeze the clock at ``at`` (default: now) for the block; the previous state comes back after."""
    before = clock.sql_now()
    clock.freeze(at or clock.now())
    try:
        yield FrozenClock()
    finally:
        clock.freeze(before)


@contextlib.contextmanager
def frozen() -> Iterator[None]:
    """The clock frozen for the block: left as it is when a test froze it, else frozen at now."""
    if clock.is_frozen():
        yield
        return
    with freeze_clock():
        yield
