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
from ultimate_jobs.db import ClaimedJob, Settlement
from ultimate_jobs.declaration import AnyJobHandle


@dataclass(slots=True, eq=False)
class Run:
    """One attempt this worker holds: the claimed row, its cancel token and its clocks."""

    claimed: ClaimedJob
    handle: AnyJobHandle
    token: CancelToken = field(default_factory=CancelToken)
    started: float = field(default_factory=time.monotonic)
    renewed: float = field(default_factory=time.monotonic)
    deadline: float | None = None
    settled: bool = False
    finished: threading.Event = field(default_factory=threading.Event)
    outcome: Settlement | None = None
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
    """The runs of one worker, by state: ``runs`` (claimed and not settled, by job id),
    ``pending`` (finished, settling in the next statement), ``abandoned`` (timed out and settled,
    the body still running on its thread) and ``done`` (finished, not yet collected)."""

    def __init__(self, wake: Callable[[], None]) -> None:
        self.runs: dict[UUID, Run] = {}
        self.pending: list[Run] = []
        self.abandoned: set[Run] = set()
        self.done: queue_module.SimpleQueue[Run] = queue_module.SimpleQueue()
        self.stats = {"claimed": 0, "settled": 0, "interrupted": 0, "lost": 0, "shed": 0}
        self._wake = wake

    def held(self) -> list[Run]:
        """The runs not settling in this pass's statement."""
        settling = set(map(id, self.pending))
        return [run for run in self.runs.values() if id(run) not in settling]

    def in_flight(self) -> int:
        return sum(1 for run in self.runs.values() if not run.finished.is_set()) + len(self.abandoned)

    def unfinished(self) -> int:
        return sum(1 for run in self.runs.values() if not run.finished.is_set())

    def forget(self, run: Run) -> None:
        if self.runs.get(run.id) is run:  # a later attempt of the same job may hold the key now
            del self.runs[run.id]

    def finish(self, run: Run) -> None:
        """A body thread's last word on ``run``."""
        self.done.put(run)  # queued before it reads as finished: whoever waits on it finds it collected
        run.finished.set()
        self._wake()

    def collect(self) -> None:
        """Move the runs that finished since the last pass to ``pending``."""
        while True:
            try:
                run = self.done.get_nowait()
            except queue_module.Empty:
                return
            if run in self.abandoned:  # failed by its timeout already; the thread has now returned
                self.abandoned.discard(run)
                continue
            if run.outcome is None:
                self.stats["lost"] += 1
                self.forget(run)
                continue
            # How long it ran: the settle dates the attempt's history entry from it (skew-free).
            run.outcome = run.outcome._replace(elapsed=time.monotonic() - run.started)
            self.pending.append(run)
