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

from ultimate_jobs.ops.lookup import short_form
from ultimate_jobs.ops.when import EMPTY, instant, relative_text, utc_text

__all__ = ["EMPTY", "badge", "error_is_current", "headline", "instant", "relative_text", "short_id", "utc_text",
           "when"]


def when(value: datetime | str | None) -> SafeString:
    """A relative time with the exact UTC instant on hover (and in ``datetime=``)."""
    moment = instant(value)
    if moment is None:
        return SafeString(EMPTY)
    return format_html('<time class="uj-time" datetime="{}" title="{}">{}</time>',
                       moment.astimezone(UTC).isoformat().replace("+00:00", "Z"), utc_text(moment),
                       relative_text(moment))


def short_id(value: Any) -> SafeString:
    """The short form (``01a23171…3bc2``, ``ops.short_form``) in monospace, the whole id on hover.
    Not the first 8 characters alone: a UUIDv7 starts with its timestamp, so those are the same
    for every job made in the same ~65 s."""
    text = str(value)
    return format_html('<code class="uj-id" title="{}">{}</code>', text, short_form(text))


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
    """Whether a job's ``last_error`` describes where it stands now: it failed, died, or was
    cancelled (the operator's note). A done job's error belongs to an earlier attempt; a live
    one's to the attempt before this one."""
    return state in ("failed", "dead", "cancelled")
