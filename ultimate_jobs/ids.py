"""Internal: UUIDv7 ids (RFC 9562): time-ordered, so new rows append to the primary key index."""

from __future__ import annotations

import random
import threading
import time
import uuid

from ultimate_jobs.errors import X_ID_INVALID, JobsError

# Python reseeds this generator in a forked child, so forked workers never share a sequence.
_random = random.Random()
_lock = threading.Lock()
_last_ms = 0
_seq = 0


def uuid7() -> uuid.UUID:
    """A UUIDv7 that increases within this process (RFC 9562 method 1: a 12-bit counter in
    ``rand_a``, seeded randomly each millisecond), so ids sort in creation order."""
    global _last_ms, _seq
    rand = _random.getrandbits(64)
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms > _last_ms:
            _last_ms, _seq = ms, (rand >> 53) & 0x7FF  # leave half the counter's room for this millisecond
        else:
            _seq += 1
            if _seq > 0xFFF:  # counter spent: borrow the next millisecond
                _last_ms, _seq = _last_ms + 1, 0
        ms, seq = _last_ms, _seq
    value = (ms << 80) | (0x7 << 76) | (seq << 64) | (0b10 << 62) | (rand & ((1 << 62) - 1))
    return _from_int(value)


def _from_int(value: int) -> uuid.UUID:
    """``uuid.UUID(int=value)`` without its argument checks (``value`` is 128 bits by construction):
    every enqueued row takes two ids, so the checks were a visible part of building one
    (docs/scaling.md)."""
    made = object.__new__(uuid.UUID)
    object.__setattr__(made, "int", value)
    object.__setattr__(made, "is_safe", uuid.SafeUUID.unknown)
    return made


def parse_uuid(value: object, *, subject: str = "id") -> uuid.UUID:
    """Accept a ``UUID`` or its lowercase canonical string; refuse anything else with ``X_ID_INVALID``."""
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
