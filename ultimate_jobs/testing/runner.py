"""Internal: the in-process runner behind ``run_job``, ``drain`` and ``crash_proof``.

It claims one known row at a time, runs the attempt on the *calling* thread through the real
execution path (``execute.run_attempt``: steps, suspension, the unwind, progress, ``on_settled``;
an ``async def`` body's loop runs beside it under ``async_to_sync``, its statements on this thread),
enforces ``timeout``/``step_timeout`` the way the worker does (a watchdog sets the cancel token,
then the attempt is failed with the worker's own verdict), and settles through the worker's own
settler (``Settler.alone``: the store's fenced settle, what waits for it run once it landed, a
failed statement raised to the test). The calling thread matters: a test inside pytest-django's
transaction sees the rows the body writes, and the body sees the test's.

A ``SimulatedCrash`` raised at a fault point leaves the row ``running`` with nothing settled, like
a killed process; ``lapse()`` then plays the lease running out (the clock moves past the
visibility timeout and the rescue hands the row back, the attempt counted).
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from datetime import timedelta
from typing import Any
from uuid import UUID

from asgiref.sync import async_to_sync
from django.db.models import F, QuerySet, Value
from django.db.models.functions import Coalesce

from ultimate_jobs import clock, jsoncodec
from ultimate_jobs.conf import get_settings
from ultimate_jobs.context import CancelToken
from ultimate_jobs.db import ClaimedJob, Settlement, store_for
from ultimate_jobs.errors import X_JOB_NOT_REGISTERED, JobsError
from ultimate_jobs.handle import JobHandle
from ultimate_jobs.models import Job
from ultimate_jobs.models.jobs import RUNNABLE_STATES
from ultimate_jobs.outbox import Relay
from ultimate_jobs.registry import get_job_handle, registered_jobs
from ultimate_jobs.runtime import deadlines
from ultimate_jobs.runtime.execute import run_attempt
from ultimate_jobs.runtime.execute_async import run_attempt_async
from ultimate_jobs.runtime.settling import Settler

_CLAIMED_FIELDS = ("id", "run_id", "name", "queue", "payload", "attempt", "max_attempts", "claim", "tenant_id",
                   "enqueued_by", "priority", "concurrency_key", "traceparent", "sensitive")
WATCH_INTERVAL = 0.01


def _declared(name: str) -> JobHandle[..., Any]:
    handle = get_job_handle(name)
    if handle is None:
        raise JobsError(X_JOB_NOT_REGISTERED, f"No job named {name!r} is declared in this process.")
    return handle


class Runner:
    """Claim, run and settle single attempts in this thread, on one database alias."""

    def __init__(self, database: str | None = None) -> None:
        self.store = store_for(database)
        self.alias = self.store.alias
        self.worker_id = f"ultimate_jobs.testing:{os.getpid()}"
        self.settler = Settler.alone(self.store, self.worker_id)

    def jobs(self) -> QuerySet[Job]:
        return Job.objects.using(self.alias)

    def claim(self, job_id: UUID) -> ClaimedJob | None:
        """Claim one known row if it is runnable now (the claim's columns, fenced on its state)."""
        now = clock.now()
        # Due-ness is judged in Python: SQLite stores a whole-second time without its microseconds,
        # so a text comparison in SQL could disagree with the stores' own timestamps.
        current = self.jobs().filter(id=job_id).values("name", "state", "run_at").first()
        if current is None:  # staged in the outbox by an enqueue inside the test's transaction
            Relay(database=self.alias).drain()
            current = self.jobs().filter(id=job_id).values("name", "state", "run_at").first()
        if current is None or current["state"] not in RUNNABLE_STATES or current["run_at"] > now:
            return None
        # Refused before the claim: a row of a name this process cannot run stays as it was.
        _declared(current["name"])
        token = uuid.uuid4()
        claimed = self.jobs().filter(id=job_id, state=current["state"]).update(
            state="running", attempt=F("attempt") + 1, claimed_by=self.worker_id, claim=token,
            visible_at=now + timedelta(seconds=get_settings().VISIBILITY_TIMEOUT),
            started_at=Coalesce("started_at", Value(now)), updated_at=now)
        if not claimed:
            return None
        row = self.jobs().filter(id=job_id).values(*_CLAIMED_FIELDS).get()
        return ClaimedJob(**{**row, "payload": jsoncodec.dumps(row["payload"])})

    def run(self, claimed: ClaimedJob) -> Settlement | None:
        """Run and settle one claimed attempt; answer its settlement (None: nothing to settle).

        A ``SimulatedCrash`` propagates with the row left running.
        """
        handle = _declared(claimed.name)
        token = CancelToken()
        deadline = None if handle.timeout is None else time.monotonic() + handle.timeout
        fired = threading.Event()
        done = threading.Event()

        def watch() -> None:
            while not done.wait(WATCH_INTERVAL):
                if deadlines.expired(claimed, handle, token, deadline, time.monotonic()):
                    fired.set()
                    return

        watcher = None
        if handle.timeout is not None or handle.step_timeout is not None:
            watcher = threading.Thread(target=watch, name="ultimate-jobs-test-watchdog", daemon=True)
            watcher.start()
        try:
            if handle.is_async:
                # async_to_sync, not asyncio.run: the body's statements (its steps, its own ORM
                # calls through sync_to_async) run on this thread, in the test's transaction.
                outcome = async_to_sync(run_attempt_async)(handle, claimed, token, alias=self.alias)
            else:
                outcome = run_attempt(handle, claimed, token, alias=self.alias)
        finally:
            done.set()
            if watcher is not None:
                watcher.join()
        if fired.is_set():  # the worker would have failed the attempt at the deadline
            outcome = deadlines.timed_out_outcome(handle, claimed, token, self.store)
        if outcome is None:
            return None
        self.settler.settle_alone(outcome)
        return outcome.settlement

    def lapse(self) -> None:
        """Play a killed worker's lease running out: move the clock past the visibility timeout
        and let the rescue hand the row back (the attempt counts)."""
        clock.advance(get_settings().VISIBILITY_TIMEOUT + 1)
        handles = registered_jobs()
        self.store.job_rescue(now=clock.sql_now(), names=[h.name for h in handles],
                              no_dead_letter=[h.name for h in handles if not h.retry.dead_letter])
