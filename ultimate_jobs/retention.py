"""The built-in retention purge: finished jobs and stored events are deleted once their retention
has passed. It is a ``purge()`` (``ultimate_jobs.purges``) with two targets.

Usage::

    # on by default: the task "ultimate_jobs.retention" fires it hourly (ultimate_jobs/jobs.py)
    from ultimate_jobs import ops
    ops.pause_task("ultimate_jobs.retention")        # the off switch
    from ultimate_jobs.retention import purge_retention
    purge_retention.enqueue()                        # a pass now

Targets, in order (each one step, ``purge:<name>``):

- ``FinishedJobs`` (``jobs``): ``done`` rows after ``DONE_RETENTION`` (14d); ``dead``, ``failed``
  and ``cancelled`` rows after ``DEAD_RETENTION`` (90d), both counted from ``finished_at``. The
  steps of a run whose last job is purged go with it. Answers ``{"jobs", "steps", "batches"}``.
- ``StoredEvents`` (``events``): events (``publish_event``) published more than
  ``DEAD_RETENTION`` ago, except those an open ``wait_for_event`` on their name, begun no later
  than the publish, could still be answered by. Answers ``{"events", "batches"}``.

Each deletes ``batch`` rows a transaction (1000; 1 to 10,000) until a batch comes back short,
stopping early when the run is cancelled (a draining worker). Two passes at once share the work
(``SKIP LOCKED``). Retries: 3 attempts, backing off from 1 minute; a target already done is not
redone.

Logged events: ``jobs.retention.purged`` (once per target per pass, ``target=jobs|events``).
"""

from __future__ import annotations

import logging
from datetime import datetime

from .conf import get_settings
from .purges import cancelled, purge
from .retry import Retry

log = logging.getLogger("ultimate_jobs")

MAX_BATCH = 10_000


def _check_batch(batch: object) -> int:
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= MAX_BATCH:
        raise ValueError(f"batch={batch!r} must be a whole number from 1 to {MAX_BATCH}")
    return batch


class FinishedJobs:
    """Finished jobs past ``DONE_RETENTION`` / ``DEAD_RETENTION``, with the steps of their runs."""

    name = "jobs"

    def __init__(self, *, batch: int = 1000) -> None:
        self.batch = _check_batch(batch)

    def __repr__(self) -> str:
        return f"<FinishedJobs batch={self.batch}>"

    def purge_expired(self, now: datetime) -> dict[str, int]:
        from .db import store_for

        conf = get_settings()
        store = store_for()
        totals = {"jobs": 0, "steps": 0, "batches": 0}
        while not cancelled():
            jobs, steps = store.job_purge_finished(done_retention=conf.DONE_RETENTION,
                                                   dead_retention=conf.DEAD_RETENTION, limit=self.batch,
                                                   now=now)
            totals["jobs"] += jobs
            totals["steps"] += steps
            totals["batches"] += 1
            if jobs < self.batch:
                break
        log.info("jobs.retention.purged target=jobs jobs=%s steps=%s batches=%s", totals["jobs"],
                 totals["steps"], totals["batches"])
        return totals


class StoredEvents:
    """Published events past ``DEAD_RETENTION`` that no open wait could still be answered by."""

    name = "events"

    def __init__(self, *, batch: int = 1000) -> None:
        self.batch = _check_batch(batch)

    def __repr__(self) -> str:
        return f"<StoredEvents batch={self.batch}>"

    def purge_expired(self, now: datetime) -> dict[str, int]:
        from .db import store_for

        retention = get_settings().DEAD_RETENTION
        store = store_for()
        totals = {"events": 0, "batches": 0}
        while not cancelled():
            events = store.event_purge(retention=retention, now=now, limit=self.batch)
            totals["events"] += events
            totals["batches"] += 1
            if events < self.batch:
                break
        log.info("jobs.retention.purged target=events events=%s batches=%s", totals["events"],
                 totals["batches"])
        return totals


finished_jobs = FinishedJobs()
stored_events = StoredEvents()
purge_retention = purge(name="ultimate_jobs.purge_retention", targets=[finished_jobs, stored_events],
                        retry=Retry(attempts=3, delay="1m"))
