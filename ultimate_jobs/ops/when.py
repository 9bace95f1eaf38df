"""Internal: how the operator surfaces write an instant — UTC, always.

The admin shows a relative time ("3 min ago") with the exact UTC instant on hover, ``jobs top``
the same, and ``ops`` answers ISO 8601 with a ``Z``. Workers, logs and the database speak UTC,
so an on-call engineer comparing a page, a terminal and a log line never converts; the
project's ``TIME_ZONE`` is not consulted (docs/admin.md, "Time").
"""

from __future__ import annotations

from datetime import UTC, datetime

from ultimate_jobs import clock

EMPTY = "\u2013"  # the en dash every empty field shows


def instant(value: datetime | str | None) -> datetime | None:
    """A datetime from a datetime or an ISO 8601 string (``ops`` answers strings)."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def utc_text(value: datetime | str | None) -> str:
    """``2026-12-01 12:52:03 UTC``, or the en dash."""
    moment = instant(value)
    return EMPTY if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def relative_text(value: datetime | str | None, now: datetime | None = None) -> str:
    """``3 min ago`` / ``in 20 s`` / ``just now``, or the en dash."""
    moment = instant(value)
    if moment is None:
        return EMPTY
    seconds = ((now or clock.now()) - moment).total_seconds()
    future, span = seconds < 0, abs(seconds)
    if span < 1:
        return "just now"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if span >= size:
            amount = f"{int(span // size)} {unit}"
            break
    else:
        amount = f"{int(span)} s"
    return f"in {amount}" if future else f"{amount} ago"
