"""Internal: how the admin writes ids, instants, states and errors, the same on every page.

The time convention is UTC, everywhere: the admin shows a relative time ("3 min ago") with the
exact UTC instant on hover (``<time title="2026-12-01 12:52:03 UTC">``), the CLI and ``ops``
answer ISO 8601 with a ``Z``. Workers, logs and the database speak UTC, so an on-call engineer
comparing a page with a log line never converts. ``TIME_ZONE`` is not consulted.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.utils.html import format_html
from django.utils.safestring import SafeString

from ultimate_jobs import clock

SHORT_ID = 8
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


def when(value: datetime | str | None) -> SafeString:
    """A relative time with the exact UTC instant on hover (and in ``datetime=``)."""
    moment = instant(value)
    if moment is None:
        return SafeString(EMPTY)
    return format_html('<time class="uj-time" datetime="{}" title="{}">{}</time>',
                       moment.astimezone(UTC).isoformat().replace("+00:00", "Z"), utc_text(moment),
                       relative_text(moment))


def short_id(value: Any) -> SafeString:
    """The first 8 characters in monospace, the whole id on hover."""
    text = str(value)
    return format_html('<code class="uj-id" title="{}">{}</code>', text, text[:SHORT_ID])


def badge(state: str) -> SafeString:
    return format_html('<span class="uj-badge uj-state-{}">{}</span>', state, state)


def headline(error: str | None) -> str:
    """The line of an error that says what happened: a traceback's last line (the exception),
    else the first non-empty line; a worker's "(not retried ...)" note is skipped."""
    lines = [line.strip() for line in (error or "").splitlines()
             if line.strip() and not line.strip().startswith("(not retried")]
    if not lines:
        return ""
    return lines[-1] if lines[0].startswith("Traceback") else lines[0]


def error_is_current(state: str) -> bool:
    """Whether a job's ``last_error`` describes where it stands now: it failed or died. A done
    job's error belongs to an earlier attempt; a live one's to the attempt before this one."""
    return state in ("failed", "dead")
