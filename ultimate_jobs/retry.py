"""Retry policies and the retry decision.

Usage::

    from ultimate_jobs import Retry, retry_schedule, register_error_retry
    retry_schedule(Retry(attempts=5, delay="1s", jitter=False))   # -> [1.0, 2.0, 4.0, 8.0]
    register_error_retry({"CARD_DECLINED": "terminal", "RATE_LIMITED": "retry-after"})

Options (default): ``attempts`` (3), ``backoff`` ("exponential" | "linear" | "fixed"),
``delay`` ("1s"), ``max_delay`` ("1h"), ``jitter`` (True: *equal* jitter, half fixed and half
random, never full), ``dead_letter`` (True: a run out of attempts becomes ``dead``; False makes it
``failed``).

The decision reads the error: a code classified ``terminal`` stops on the attempt it happened,
``retry-after`` waits the exception's ``retry_after`` seconds (clamped by ``max_delay``) and
still burns an attempt, anything else follows the schedule.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field

from ultimate_jobs.durations import to_seconds
from ultimate_jobs.errors import X_JOB_DECLARATION_INVALID, JobsError, RetryAfter, Terminal

BACKOFFS = ("exponential", "linear", "fixed")
CLASSES = ("terminal", "retry-after", "retryable")
_ERROR_CLASSES: dict[str, str] = {}


@dataclass(frozen=True, slots=True, kw_only=True)
class Retry:
    attempts: int = 3
    backoff: str = "exponential"
    delay: float | str = 1.0
    max_delay: float | str = 3600.0
    jitter: bool = True
    dead_letter: bool = True
    delay_seconds: float = field(init=False, repr=False)
    max_delay_seconds: float = field(init=False, repr=False)

    def __post_init__(self) -> None:
        code = X_JOB_DECLARATION_INVALID
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int) or self.attempts < 1:
            raise JobsError(code, f"Retry(attempts={self.attempts!r}) must be a whole number >= 1.")
        if self.backoff not in BACKOFFS:
            raise JobsError(code, f"Retry(backoff={self.backoff!r}) is not one of {', '.join(BACKOFFS)}.")
        object.__setattr__(self, "delay_seconds",
                           to_seconds(self.delay, subject="Retry.delay", positive=False, code=code))
        object.__setattr__(self, "max_delay_seconds",
                           to_seconds(self.max_delay, subject="Retry.max_delay", code=code))

    @classmethod
    def coerce(cls, value: Retry | int | None) -> Retry:
        if value is None:
            return cls()
        if isinstance(value, Retry):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return cls(attempts=value)
        raise JobsError(X_JOB_DECLARATION_INVALID, f"retry={value!r} is neither a Retry nor a number of attempts.")

    def describe(self) -> dict[str, object]:
        return {"attempts": self.attempts, "backoff": self.backoff, "delay": self.delay_seconds,
                "max_delay": self.max_delay_seconds, "jitter": self.jitter, "dead_letter": self.dead_letter}

    def base_delay(self, attempt: int) -> float:
        """Seconds before the retry that follows failed ``attempt`` (1-based), without jitter."""
        if self.backoff == "fixed":
            raw = self.delay_seconds
        elif self.backoff == "linear":
            raw = self.delay_seconds * attempt
        else:
            raw = self.delay_seconds * (2.0 ** min(attempt - 1, 64))
        return min(raw, self.max_delay_seconds)

    def delay_after(self, attempt: int, rng: random.Random | None = None) -> float:
        base = self.base_delay(attempt)
        if not self.jitter:
            return base
        half = base / 2
        return half + (rng or random).uniform(0, half)


def retry_schedule(policy: Retry | int) -> list[float]:
    """The delays between attempts, in seconds, without jitter: one fewer than ``attempts``."""
    policy = Retry.coerce(policy)
    return [policy.base_delay(attempt) for attempt in range(1, policy.attempts)]


def register_error_retry(classes: Mapping[str, str]) -> None:
    """Classify error codes (an exception's ``code`` attribute) as terminal, retry-after or retryable."""
    for code, kind in classes.items():
        if not isinstance(code, str) or not code or kind not in CLASSES:
            raise JobsError(X_JOB_DECLARATION_INVALID, f"register_error_retry: {code!r} -> {kind!r} is not valid.",
                            f"Map non-empty code strings to one of {', '.join(CLASSES)}.")
    _ERROR_CLASSES.update(classes)


def classify(error: BaseException) -> tuple[str, float | None]:
    """Answer ``(kind, retry_after_seconds)`` for an exception raised by a job body."""
    if isinstance(error, Terminal):
        return "terminal", None
    code = getattr(error, "code", None)
    declared = _ERROR_CLASSES.get(code) if isinstance(code, str) else None
    retry_after = getattr(error, "retry_after", None)
    if declared == "terminal":
        return "terminal", None
    if isinstance(error, RetryAfter) or declared == "retry-after":
        try:
            seconds = float(retry_after) if retry_after is not None else None
        except (TypeError, ValueError):
            seconds = None
        if seconds is not None and seconds == seconds and seconds >= 0:
            return "retry-after", seconds
    return "retryable", None
