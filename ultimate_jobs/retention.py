"""The built-in retention purge: finished jobs are deleted once their retention has passed.

Usage::

    # on by default: the task "ultimate_jobs.retention" fires it hourly (ultimate_jobs/jobs.py)
    from ultimate_jobs import ops
    ops.pause_task("ultimate_jobs.retention")        # the off switch
    from ultimate_jobs.retention import purge_retention
    purge_retention.enqueue(batch=500)               # a pass now

Options (default): ``DONE_RETENTION`` (14d) for ``done`` rows, ``DEAD_RETENTION`` (90d) for
``dead``, ``failed`` and ``cancelled`` rows, both counted from ``finished_at``; ``batch``
(1000 rows a transaction, 1 to 10,000). The steps of a run whose last job is purged go with it.
A pass deletes batch after batch until one comes back short, stopping early when the run is
cancelled (a draining worker). Two passes at once share the work (``SKIP LOCKED``).

Logged events: ``jobs.retention.purged``.
"""

from __future__ import annotations

import logging
from typing import Any

from . import clock
from .conf import get_settings
from .declaration import NO_TENANT, job
from .retry import Retry

log = logging.getLogger("ultimate_jobs")

MAX_BATCH = 10_000


@job(name="ultimate_jobs.purge_retention", idempotency_key="retention", tenant=NO_TENANT,
     retry=Retry(attempts=3, delay="1m"))
def purge_retention(ctx: Any, *, batch: int = 1000) -> dict[str, int]:
    """Delete finished jobs past ``DONE_RETENTION`` / ``DEAD_RETENTION`` in batches; answer the counts."""
    from .db import store_for

    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= MAX_BATCH:
        raise ValueError(f"batch={batch!r} must be a whole number from 1 to {MAX_BATCH}")
    conf = get_settings()
    store = store_for()
    totals = {"jobs": 0, "steps": 0, "batches": 0}
    now = clock.sql_now()  # None in production: the database clock decides each cutoff
    while not ctx.cancelled:
        jobs, steps = store.job_purge_finished(done_retention=conf.DONE_RETENTION,
                                               dead_retention=conf.DEAD_RETENTION, limit=batch, now=now)
        totals["jobs"] += jobs
        totals["steps"] += steps
        totals["batches"] += 1
        if jobs < batch:
            break
    log.info("jobs.retention.purged jobs=%s steps=%s batches=%s", totals["jobs"], totals["steps"],
             totals["batches"])
    return totals
