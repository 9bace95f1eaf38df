"""Internal: what one worker holds — its runs in flight, the finished ones waiting to settle, the
abandoned ones — shared by the worker's parts (claims, settling, leases, drain)."""

from __future__ import annotations

import queue as queue_module
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from uuid import UUID

from ultimate_jobs.context import CancelToken
from ultimate_jobs.db import ClaimedJob
from ultimate_jobs.handle import AnyJobHandle
from ultimate_jobs.runtime.outcome import Outcome


@dataclass(slots=True, eq=False)
class Attempt:
    """One attempt this worker holds: the claimed row, its cancel token, its clocks and, once its
    body returned, how it ended (``outcome``)."""

    claimed: ClaimedJob
    handle: AnyJobHandle
    token: CancelToken = field(default_factory=CancelToken)
    started: float = field(default_factory=time.monotonic)
    renewed: float = field(default_factory=time.monotonic)
    deadline: float | None = None
    settled: bool = False
    finished: threading.Event = field(default_factory=threading.Event)
    outcome: Outcome | None = None
    slot: tuple[str, int] | None = None

    @property
    def id(self) -> UUID:
        return self.claimed.id


def count(values: Iterable[str | None]) -> dict[str, int]:
    """How many times each value other than ``None`` occurs."""
    counts: dict[str, int] = {}
    for value in values:
        if value is not None:
            counts[value] = counts.get(value, 0) + 1
    return counts


class Holdings:
    """The attempts of one worker, by state: ``attempts`` (claimed and not settled, by job id),
    ``pending`` (finished, settling in the next statement), ``abandoned`` (timed out and settled,
    the body still running on its thread) and ``done`` (finished, not yet collected)."""

    def __init__(self, wake: Callable[[], None]) -> None:
        self.attempts: dict[UUID, Attempt] = {}
        self.pending: list[Attempt] = []
        self.abandoned: set[Attempt] = set()
        self.done: queue_module.SimpleQueue[Attempt] = queue_module.SimpleQueue()
        self.stats = {"claimed": 0, "settled": 0, "interrupted": 0, "lost": 0, "shed": 0}
        self._wake = wake

    def held(self) -> list[Attempt]:
        """The runs not settling in this pass's statement."""
        settling = set(map(id, self.pending))
        return [attempt for attempt in self.attempts.values() if id(attempt) not in settling]

    def in_flight(self) -> int:
        return sum(1 for attempt in self.attempts.values() if not attempt.finished.is_set()) + len(self.abandoned)

    def unfinished(self) -> int:
        return sum(1 for attempt in self.attempts.values() if not attempt.finished.is_set())

    def forget(self, attempt: Attempt) -> None:
        if self.attempts.get(attempt.id) is attempt:  # a later attempt of the same job may hold the key now
            del self.attempts[attempt.id]

    def finish(self, attempt: Attempt) -> None:
        """A body thread's last word on ``run``."""
        self.done.put(attempt)  # queued before it reads as finished: whoever waits on it finds it collected
        attempt.finished.set()
        self._wake()

    def collect(self) -> None:
        """Move the runs that finished since the last pass to ``pending``."""
        while True:
            try:
                attempt = self.done.get_nowait()
            except queue_module.Empty:
                return
            if attempt in self.abandoned:  # failed by its timeout already; the thread has now returned
                self.abandoned.discard(attempt)
                continue
            if attempt.outcome is None:
                self.stats["lost"] += 1
                self.forget(attempt)
                continue
            # How long it ran: the settle dates the attempt's history entry from it (skew-free).
            settlement = attempt.outcome.settlement._replace(elapsed=time.monotonic() - attempt.started)
            attempt.outcome = attempt.outcome._replace(settlement=settlement)
            self.pending.append(attempt)
