"""``force_leader(scheduler)``: a scheduler that acts as leader whatever the lease says.

Usage::

    from ultimate_jobs import Scheduler
    from ultimate_jobs.testing import force_leader

    one = force_leader(Scheduler(tasks=[nightly], holder="one"))
    two = force_leader(Scheduler(tasks=[nightly], holder="two"))
    assert one.run_once().leading and two.run_once().leading   # both believe they lead

Two schedulers that both lead dispatch the same tasks side by side, which is how a test proves
that the watermark's compare-and-set alone fires each occurrence once. Each election still goes
to the database as usual (the lease row is written, renewed and handed back); only its answer is
read as leading.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from ultimate_jobs.db import LeaderLease, Store

if TYPE_CHECKING:
    from ultimate_jobs.schedule.scheduler import Scheduler


class _Elected:
    """``store`` with every election answered leading; everything else is ``store``'s own."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def leader_attempt_elect(self, *, name: str, holder: str, ttl: float, now: datetime | None) -> LeaderLease:
        lease = self._store.leader_attempt_elect(name=name, holder=holder, ttl=ttl, now=now)
        return lease._replace(leading=True)

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._store, attribute)


def force_leader(scheduler: Scheduler) -> Scheduler:
    """Make ``scheduler`` act as leader whatever its lease says, from its next round on; answer it."""
    leadership = scheduler.leadership
    if not isinstance(leadership.store, _Elected):
        leadership.store = cast(Store, _Elected(leadership.store))
    return scheduler
