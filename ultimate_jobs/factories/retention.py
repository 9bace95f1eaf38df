"""The built-in retention purge: finished jobs and stored events are deleted once their retention
has passed. It is a ``purge()`` (``ultimate_jobs.factories.purge``) with three targets.

Usage::

    # on by default: the task "ultimate_jobs.retention" fires it hourly (ultimate_jobs/jobs.py)
    from ultimate_jobs import ops
    ops.pause_task("ultimate_jobs.retention")        # the off switch
    from ultimate_jobs.factories.retention import purge_retention
    purge_retention.enqueue()                        # a pass now

Targets, in order (each one step, ``purge:<name>``):

- ``FinishedJobs`` (``jobs``): ``done`` rows after ``DONE_RETENTION`` (14d); ``dead``, ``failed``
  and ``cancelled`` rows after ``DEAD_RETENTION`` (90d), both counted from ``finished_at``. The
  steps of a run whose last job is purged go with it. Answers ``{"jobs", "steps", "batches"}``.
- ``StoredEvents`` (``events``): events (``publish_event``) published more than
  ``DEAD_RETENTION`` ago, except those an open ``wait_for_event`` on their name, begun no later
  than the publish, could still be answered by. Answers ``{"events", "batches"}``.
- ``WebhookDeliveries`` (``webhook-deliveries``, in ``factories.webhook.ledger``): webhook ledger
  rows (``WebhookDelivery``) older than ``DEAD_RETENTION``. Answers ``{"deliveries", "batches"}``.

Each deletes ``batch`` rows a transaction (1000; 1 to 10,000) until a batch comes back short,
stopping early when the run is cancelled (a draining worker). Two passes at once share the work
(``SKIP LOCKED``). Retries: 3 attempts, backing off from 1 minute; a target already done is not
redone.

Logged events: ``jobs.retention.purged`` (once per target per pass, ``target=jobs|events``).
"""

from __future__ import annotations

import logging
from datetime import datetime

from ultimate_jobs.conf import get_settings
from ultimate_jobs.db import store_for
from ultimate_jobs.db.routing import aliases
from ultimate_jobs.db.store import Store
from ultimate_jobs.factories.kit import is_whole
from ultimate_jobs.factories.purge import cancelled, purge
from ultimate_jobs.factories.webhook.ledger import webhook_deliveries
from ultimate_jobs.retry import Retry

log = logging.getLogger("ultimate_jobs")

MAX_BATCH = 10_000


class _BatchedTarget:
    """A purge target that deletes ``batch`` rows a statement until a statement comes back short
    (or the run is cancelled), summing what each statement answered; one log line per pass."""

    name = ""

    def __init__(self, *, batch: int = 1000) -> None:
        if not is_whole(batch, 1, MAX_BATCH):
            raise ValueError(f"batch={batch!r} must be a whole number from 1 to {MAX_BATCH}")
        self.batch = batch

    def __repr__(self) -> str:
        return f"<{type(self).__name__} batch={self.batch}>"

    def delete_one_batch(self, store: Store, now: datetime) -> dict[str, int]:
        """Delete at most ``self.batch`` rows; answer the counts, the first being the rows deleted."""
        raise NotImplementedError

    def purge_expired(self, now: datetime) -> dict[str, int]:
        totals: dict[str, int] = {}
        for alias in aliases():  # QUEUE_DATABASES: a routed database's finished rows expire too
            store = store_for(alias)
            while not cancelled():
                counts = self.delete_one_batch(store, now)
                for key, value in counts.items():
                    totals[key] = totals.get(key, 0) + value
                totals["batches"] = totals.get("batches", 0) + 1
                if next(iter(counts.values())) < self.batch:
                    break
        log.info("jobs.retention.purged target=%s %s", self.name, " ".join(f"{k}={v}" for k, v in totals.items()))
        return totals


class FinishedJobs(_BatchedTarget):
    """Finished jobs past ``DONE_RETENTION`` / ``DEAD_RETENTION``, with the steps of their runs."""

    name = "jobs"

    def delete_one_batch(self, store: Store, now: datetime) -> dict[str, int]:
        conf = get_settings()
        purged = store.job_purge_finished(done_retention=conf.DONE_RETENTION, dead_retention=conf.DEAD_RETENTION,
                                          limit=self.batch, now=now)
        return {"jobs": purged.jobs, "steps": purged.steps}


class StoredEvents(_BatchedTarget):
    """Published events past ``DEAD_RETENTION`` that no open wait could still be answered by."""

    name = "events"

    def delete_one_batch(self, store: Store, now: datetime) -> dict[str, int]:
        return {"events": store.event_purge(retention=get_settings().DEAD_RETENTION, now=now, limit=self.batch)}


finished_jobs = FinishedJobs()
stored_events = StoredEvents()
purge_retention = purge(name="ultimate_jobs.purge_retention", targets=[finished_jobs, stored_events,
                                                                          webhook_deliveries],
                        retry=Retry(attempts=3, delay="1m"))
