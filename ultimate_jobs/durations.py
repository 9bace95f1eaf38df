"""Internal: one parser for every duration ultimate_jobs accepts.

``"250ms"``, ``"30s"``, ``"10m"``, ``"3h"``, ``"3d"``, a ``timedelta`` or a number of seconds.
NaN, infinity, booleans and unparseable strings are refused; so is a negative value, and zero
where the caller needs a positive one.
"""

from __future__ import annotations

import math
import re
from datetime import timedelta

from ultimate_jobs.errors import X_CONFIG_INVALID, JobsError

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$")

Duration = str | int | float | timedelta


def to_seconds(value: object, *, subject: str, positive: bool = True, code: str = X_CONFIG_INVALID) -> float:
    """Answer ``value`` in seconds, or raise ``code`` naming ``subject``."""
    seconds: float
    if isinstance(value, bool):
        seconds = math.nan
    elif isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (match := _PATTERN.match(value)):
        seconds = float(match.group(1)) * _UNITS[match.group(2)]
    else:
        raise JobsError(code, f"{subject}={value!r} is not a duration.",
                        'Write a duration such as "250ms", "30s", "10m", "3h", "3d", a timedelta or seconds.')
    if not math.isfinite(seconds):
        raise JobsError(code, f"{subject}={value!r} is not a finite duration.", "Use a finite number of seconds.")
    if seconds < 0 or (positive and seconds == 0):
        need = "positive" if positive else "zero or more"
        raise JobsError(code, f"{subject}={value!r} must be {need}.", f"Give {subject} a {need} duration.")
    return seconds
