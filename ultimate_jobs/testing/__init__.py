"""Test helpers for apps that declare jobs: a frozen clock, ``run_job``, ``drain``, traces,
``crash_proof`` and assertions on what was enqueued. A pytest plugin (``ultimate_jobs.testing.plugin``,
loaded automatically once the package is installed) exposes them as fixtures.

Usage::

    from ultimate_jobs.testing import run_job

    @pytest.mark.django_db
    def test_onboarding_retries_only_the_failed_step(jobs_clock, drain_jobs):
        trace = run_job(onboard_org, org_id="acme")        # runs until done, dead or suspended
        assert trace.state == "suspended"                  # the 3-day sleep
        (trace,) = drain_jobs(advance="3d")                # time passes; the sleeper resumes
        assert trace.state == "done"
        assert trace.steps["provision"].executions == 1    # replayed from storage, never re-run

Options (default): ``run_job(handle, /, **input)`` and ``drain(advance=None, *, database=None)``
run attempts in-process, on the calling thread, through the real execution path (steps,
suspension, compensation, progress, ``on_settled``); between failed attempts they move the frozen
clock to the retry's ``run_at`` instead of sleeping; they stop at a terminal state or a suspension
(a suspended run resumes in a later ``drain`` once the clock reaches its wake time, or an event
woke it). ``run_job`` enqueues straight into the job table (bypassing any outbox), so it works
inside ``transaction.atomic()`` and pytest-django's ``db`` fixture. If the clock is not frozen,
``run_job`` freezes it at the current time for its own duration.

Fixtures (plugin): ``jobs_clock`` (a frozen ``FrozenClock``, restored after the test),
``run_job``, ``drain_jobs``, ``crash_proof``, ``record_effect``.

Raises ``X_JOB_NOT_REGISTERED`` for a job name this process has not declared.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from ultimate_jobs import clock, jsoncodec
from ultimate_jobs.db import store_for
from ultimate_jobs.declaration import JobHandle, registered_jobs
from ultimate_jobs.durations import to_seconds
from ultimate_jobs.testing.runner import Runner

__all__ = [
    "FrozenClock",
    "SimulatedCrash",
    "StepTrace",
    "Trace",
    "assert_enqueued",
    "assert_not_enqueued",
    "crash_at",
    "crash_proof",
    "drain",
    "enqueued",
    "freeze_clock",
    "record_effect",
    "recorded_effects",
    "run_job",
]

MAX_ATTEMPTS_PER_CALL = 10_000  # a safety stop for a run that never ends


# -- the clock --------------------------------------------------------------------------------------


class FrozenClock:
    """The test clock every ultimate_jobs deadline reads (and every SQL ``now``)."""

    def now(self) -> datetime:
        return clock.now()

    def advance(self, by: Any) -> datetime:
        """Move the frozen time forward by a duration (``"3d"``, a ``timedelta``, seconds)."""
        return clock.advance(timedelta(seconds=to_seconds(by, subject="advance", positive=False)))

    def set(self, at: datetime) -> datetime:
        clock.freeze(at)
        return clock.now()

    @property
    def pauses(self) -> list[float]:
        """The waits asked of this clock since it was frozen (a backfill's pacer), in seconds:
        on a frozen clock they are not spent, the time moves forward by them instead."""
        return clock.pauses()


@contextlib.contextmanager
def freeze_clock(at: datetime | None = None) -> Iterator[FrozenClock]:
    """Freeze the clock at ``at`` (default: now) for the block; the previous state comes back after."""
    before = clock.sql_now()
    clock.freeze(at or clock.now())
    try:
        yield FrozenClock()
    finally:
        clock.freeze(before)


# -- traces -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StepTrace:
    name: str
    status: str
    executions: int
    output: Any
    error: str | None
    started_at: datetime | None
    completed_at: datetime | None


@dataclass(frozen=True, slots=True)
class Trace:
    """One job as it stands after a run: its row and its steps in execution order."""

    id: UUID
    run_id: UUID
    name: str
    state: str
    attempt: int
    max_attempts: int
    result: Any
    last_error: str | None
    error_code: str | None
    stop_reason: str | None
    progress: dict[str, Any] | None
    run_at: datetime
    steps: dict[str, StepTrace] = field(default_factory=dict)

    def __repr__(self) -> str:
        return (f"<Trace {self.name} {self.state} attempt={self.attempt} error_code={self.error_code} "
                f"steps={[f'{s.name}:{s.status}x{s.executions}' for s in self.steps.values()]}>")


def trace(job_id: UUID, *, database: str | None = None) -> Trace:
    """The trace of one job as stored now."""
    from ultimate_jobs.models import Job, JobStep

    alias = store_for(database).alias
    row = Job.objects.using(alias).get(id=job_id)
    steps = (JobStep.objects.using(alias).filter(run_id=row.run_id).order_by("seq", "id")
             .values_list("name", "status", "executions", "output", "error", "started_at", "completed_at"))
    return Trace(id=row.id, run_id=row.run_id, name=row.name, state=row.state, attempt=row.attempt,
                 max_attempts=row.max_attempts, result=row.result, last_error=row.last_error,
                 error_code=row.error_code, stop_reason=row.stop_reason, progress=row.progress, run_at=row.run_at,
                 steps={s[0]: StepTrace(*s) for s in steps})


# -- running --------------------------------------------------------------------------------------


@contextlib.contextmanager
def _frozen() -> Iterator[None]:
    if clock.is_frozen():
        yield
        return
    with freeze_clock():
        yield


def run_job(handle: JobHandle, /, **input: Any) -> Trace:
    """Enqueue ``handle(**input)`` (bypassing any outbox) and run its attempts until it is
    terminal or suspended; answer its trace. A live job holding the key is run instead."""
    row = handle.using().row(input)
    store = store_for(None)
    with _frozen():
        job_id = store.job_insert_many(rows=[row], now=clock.sql_now())[0].id
        return _drive([job_id])[job_id]


def drain(advance: Any = None, *, database: str | None = None) -> list[Trace]:
    """Advance the frozen clock by ``advance`` (if given), then run every due job of a declared
    name until each is terminal or suspended; answer their traces, in the order first run."""
    if advance is not None:
        if not clock.is_frozen():
            raise RuntimeError("drain(advance=...) needs a frozen clock: use the jobs_clock fixture or "
                               "ultimate_jobs.testing.freeze_clock().")
        FrozenClock().advance(advance)
    from ultimate_jobs.models.jobs import RUNNABLE_STATES

    runner = Runner(database)
    names = [h.name for h in registered_jobs()]
    ran: dict[UUID, Trace] = {}
    for _ in range(MAX_ATTEMPTS_PER_CALL):
        _publish_staged(database)
        now = clock.now()
        due = [job_id for job_id, run_at in runner.jobs().filter(state__in=RUNNABLE_STATES, name__in=names)
               .order_by("priority", "run_at", "id").values_list("id", "run_at") if run_at <= now]
        if not due:
            break
        ran.update(_drive(due, database=database))
    return list(ran.values())


def _publish_staged(database: str | None) -> None:
    """Publish what the test staged in the outbox (an enqueue inside its transaction, as in a
    ``TestCase``), in this thread and transaction, as the relay would after a commit."""
    from ultimate_jobs.outbox import Relay

    Relay(database=database).drain()


def _drive(job_ids: list[UUID], *, database: str | None = None) -> dict[UUID, Trace]:
    """Run each job's attempts, moving the clock over retry delays, until terminal or suspended."""
    runner = Runner(database)
    for job_id in job_ids:
        for _ in range(MAX_ATTEMPTS_PER_CALL):
            claimed = runner.claim(job_id)
            if claimed is None:
                row = runner.jobs().filter(id=job_id).values("state", "attempt", "run_at").first()
                if row is None or row["state"] not in ("ready", "delayed") or row["attempt"] == 0:
                    break  # terminal, suspended, running elsewhere, or waiting for its first run_at
                if row["run_at"] > clock.now():
                    clock.freeze(row["run_at"])  # a retry's delay passes at once
                continue
            runner.run(claimed)
    return {job_id: trace(job_id, database=database) for job_id in job_ids}


# -- effects ---------------------------------------------------------------------------------------

_effects: Counter[str] = Counter()
_effects_lock = threading.Lock()


def record_effect(name: str, count: int = 1) -> None:
    """Count an external effect (an email sent, a charge made) so ``crash_proof`` can see it
    happen twice. Cheap and harmless outside tests; call it where the effect happens."""
    with _effects_lock:
        _effects[name] += count


def recorded_effects() -> Counter[str]:
    """A copy of the effects counted so far in this process."""
    with _effects_lock:
        return Counter(_effects)


# -- assertions on what was enqueued ------------------------------------------------------------------


def enqueued(handle: JobHandle, *, states: tuple[str, ...] | None = None, database: str | None = None,
             **input: Any) -> list[dict[str, Any]]:
    """Jobs of ``handle`` in ``states`` (default: live) whose payload holds every given input value
    (compared in stored JSON form), oldest first, as ``{id, state, payload, run_at, ...}`` dicts.
    An enqueue staged in the outbox and not yet published (inside the test's transaction) counts
    as live, with state ``"staged"``."""
    from ultimate_jobs.models import Job, OutboxEntry
    from ultimate_jobs.models.jobs import LIVE_STATES

    states = LIVE_STATES if states is None else states
    wanted = jsoncodec.loads(jsoncodec.dumps(input))
    alias = store_for(database).alias
    rows = list(Job.objects.using(alias).filter(name=handle.name, state__in=states).order_by("id")
                .values("id", "run_id", "state", "payload", "tenant_id", "queue", "priority", "run_at", "attempt"))
    if set(states) & set(LIVE_STATES):
        for entry in (OutboxEntry.objects.using(alias).filter(name=handle.name, published_at__isnull=True)
                      .order_by("staged_at", "id")
                      .values("id", "run_id", "payload", "tenant_id", "queue", "priority", "run_at")):
            rows.append({**entry, "state": "staged", "attempt": 0, "payload": jsoncodec.loads(entry["payload"])})
    return [row for row in rows if jsoncodec.contains(row["payload"], wanted)]


def assert_enqueued(handle: JobHandle, *, count: int | None = None, states: tuple[str, ...] | None = None,
                    **input: Any) -> list[dict[str, Any]]:
    """Assert that ``handle`` has a live job (exactly ``count`` when given; ``states`` to look
    elsewhere) whose payload matches ``input``; answer the matching rows."""
    found = enqueued(handle, states=states, **input)
    if count is None and not found:
        raise AssertionError(f"no {handle.name} job {_describe(input)} in states {states or 'live'}; "
                             f"enqueued: {[r['payload'] for r in enqueued(handle, states=states)]}")
    if count is not None and len(found) != count:
        raise AssertionError(f"expected {count} {handle.name} job(s) {_describe(input)}, found {len(found)}")
    return found


def assert_not_enqueued(handle: JobHandle, *, states: tuple[str, ...] | None = None, **input: Any) -> None:
    """Assert that no job of ``handle`` (in any state by default) has a payload matching ``input``."""
    from ultimate_jobs.models.jobs import STATES

    found = enqueued(handle, states=STATES if states is None else states, **input)
    if found:
        raise AssertionError(f"{len(found)} {handle.name} job(s) {_describe(input)} were enqueued: "
                             f"{[str(r['id']) for r in found]}")


def _describe(input: Mapping[str, Any]) -> str:
    return "with " + ", ".join(f"{k}={v!r}" for k, v in input.items()) if input else "at all"


# crash_proof, crash_at and SimulatedCrash (ultimate_jobs.testing.crash) build on the helpers above.
from ultimate_jobs.testing.crash import SimulatedCrash, crash_at, crash_proof  # noqa: E402
