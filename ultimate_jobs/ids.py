"""Internal: UUIDv7 ids (RFC 9562): time-ordered, so new rows append to the primary key index."""

from __future__ import annotations

import os
import threading
import time
import uuid

_lock = threading.Lock()
_last = 0


def uuid7() -> uuid.UUID:
    """A UUIDv7 whose 48-bit millisecond prefix never goes backwards within this process."""
    global _last
    with _lock:
        ms = max(time.time_ns() // 1_000_000, _last)
        _last = ms
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms << 80) | (0x7 << 76) | ((rand >> 68) & 0xFFF) << 64 | (0b10 << 62) | (rand & ((1 << 62) - 1))
    return uuid.UUID(int=value)


def parse_uuid(value: object, *, subject: str = "id") -> uuid.UUID:
    """Accept a ``UUID`` or its lowercase canonical string; refuse anything else with ``X_ID_INVALID``."""
    from .errors import X_ID_INVALID, JobsError

    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, str):
        try:
            parsed = uuid.UUID(value)
        except ValueError:
            parsed = None
        if parsed is not None and str(parsed) == value:
            return parsed
    raise JobsError(X_ID_INVALID, f"{subject}={value!r} is not a lowercase UUID.")
