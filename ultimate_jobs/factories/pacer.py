"""Internal: the throttle a backfill sweeps under: ``rate`` batches per second, spent as a wait
before each batch but the first.

A sweep shares the database with the requests the site is still serving, so a pass that runs
flat out is an outage of its own making. There is deliberately no "off": a rate above what the
batches can achieve simply never waits (a wait under a millisecond is skipped), so the fast sweep
is a larger number, never a different mode.

The time a batch itself took counts towards its interval: a slow page waits for nothing, only a
fast one is held back. The wait ends early when the run is cancelled (``X_ABORTED``,
``X_DRAINING``...), raising the token's reason, so a drain never sits out a timer.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ultimate_jobs import clock
from ultimate_jobs.errors import X_JOB_DECLARATION_INVALID, JobsError

if TYPE_CHECKING:
    from ultimate_jobs.context import CancelToken

DEFAULT_RATE = 5
RESOLUTION = 0.001


def check_rate(rate: object, *, owner: str) -> float:
    """Answer ``rate`` as a float when it is a finite number above zero; else raise."""
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not math.isfinite(rate) or rate <= 0:
        raise JobsError(X_JOB_DECLARATION_INVALID,
                        f"{owner} declares rate={rate!r}; a rate is batches per second, a finite number above zero.",
                        f"Set rate={DEFAULT_RATE} (or leave it out); to sweep faster raise the number, there is "
                        "no unthrottled mode.")
    return float(rate)


class Pacer:
    """Spaces calls to ``wait`` at least ``1 / rate`` seconds apart; one per pass attempt."""

    __slots__ = ("interval", "_last")

    def __init__(self, rate: float, *, owner: str = "pacer") -> None:
        self.interval = 1.0 / check_rate(rate, owner=owner)
        self._last: float | None = None

    def wait(self, token: CancelToken) -> None:
        """Hold the caller until its slot comes round; raise the cancel reason if cancelled first."""
        token.check()
        at = clock.monotonic()
        remaining = 0.0 if self._last is None else self.interval - (at - self._last)
        if remaining >= RESOLUTION:
            if not clock.pause(min(remaining, self.interval), token):
                token.check()
            at = clock.monotonic()
        self._last = at
