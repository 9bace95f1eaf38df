"""Test helpers for apps that declare jobs: a frozen clock, ``run_job``, ``drain``, traces,
``crash_proof``, assertions on what was enqueued and ``force_leader`` (a scheduler that leads
whatever the lease says). A pytest plugin (``ultimate_jobs.pytest_plugin``,
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

from collections.abc import Mapping
from datetime import datetime
from typing import Any, TypedDict
from uuid import UUID

from ultimate_jobs import clock, jsoncodec
from ultimate_jobs.db import store_for
from ultimate_jobs.durations import Duration
from ultimate_jobs.handle import JobHandle
from ultimate_jobs.models import Job, OutboxEntry
from ultimate_jobs.models.jobs import LIVE_STATES, RUNNABLE_STATES, STATES
from ultimate_jobs.outbox import Relay
from ultimate_jobs.registry import registered_jobs
from ultimate_jobs.testing.crash import SimulatedCrash, crash_at, crash_proof
from ultimate_jobs.testing.effects import record_effect, recorded_effects
from ultimate_jobs.testing.frozen import FrozenClock, freeze_clock, frozen
from ultimate_jobs.testing.leading import force_leader
from ultimate_jobs.testing.runner import Runner
from ultimate_jobs.testing.subject import prove
from ultimate_jobs.testing.traces import StepTrace, Trace, trace

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
    "force_leader",
    "freeze_clock",
    "record_effect",
    "recorded_effects",
    "run_job",
    "subject_proof",
]

MAX_ATTEMPTS_PER_CALL = 10_000  # a safety stop for a run that never ends


# -- running --------------------------------------------------------------------------------------


def run_job(handle: JobHandle[..., Any], /, **input: Any) -> Trace:
    """Enqueue ``handle(**input)`` (bypassing any outbox) and run its attempts until it is
    terminal or suspended; answer its trace. A live job holding the key is run instead."""
    row = handle.using().row(input)
    store = store_for(None)
    with frozen():
        job_id = store.job_insert_many(rows=[row], now=clock.sql_now())[0].id
        return _drive([job_id])[job_id]


def drain(advance: Duration | None = None, *, database: str | None = None) -> list[Trace]:
    """Advance the frozen clock by ``advance`` (if given), then run every due job of a declared
    name until each is terminal or suspended; answer their traces, in the order first run."""
    if advance is not None:
        if not clock.is_frozen():
            raise RuntimeError("drain(advance=...) needs a frozen clock: use the jobs_clock fixture or "
                               "ultimate_jobs.testing.freeze_clock().")
        FrozenClock().advance(advance)
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


def subject_proof(subject: Any, *, input: Any = None) -> dict[str, Any]:
    """Plant canaries for one generated person in every table ``subject`` reaches, erase them with
    the real erase job (``run_job``, in this process), and search every stored row: a canary
    outside a ``retain`` raises ``X_SUBJECT_ERASE_INCOMPLETE`` naming the table and column
    (``ultimate_jobs.testing.subject``; docs/reference/subject.md)."""
    return prove(subject, run_job=run_job, input=input)


# -- assertions on what was enqueued ------------------------------------------------------------------


class EnqueuedJob(TypedDict):
    """One row ``enqueued()`` answers: a job, or an unpublished outbox row (``state="staged"``)."""

    id: UUID
    run_id: UUID
    state: str
    payload: Any
    tenant_id: str | None
    queue: str
    priority: int
    run_at: datetime
    attempt: int


def enqueued(handle: JobHandle[..., Any], *, states: tuple[str, ...] | None = None, database: str | None = None,
             **input: Any) -> list[EnqueuedJob]:
    """Jobs of ``handle`` in ``states`` (default: live) whose payload holds every given input value
    (compared in stored JSON form), oldest first, as ``{id, state, payload, run_at, ...}`` dicts.
    An enqueue staged in the outbox and not yet published (inside the test's transaction) counts
    as live, with state ``"staged"``."""
    states = LIVE_STATES if states is None else states
    wanted = jsoncodec.loads(jsoncodec.dumps(input))
    alias = store_for(database).alias
    rows = [EnqueuedJob(**row) for row in Job.objects.using(alias).filter(name=handle.name, state__in=states)
            .order_by("id").values("id", "run_id", "state", "payload", "tenant_id", "queue", "priority", "run_at",
                                   "attempt")]
    if set(states) & set(LIVE_STATES):
        for entry in (OutboxEntry.objects.using(alias).filter(name=handle.name, published_at__isnull=True)
                      .order_by("staged_at", "id")
                      .values("id", "run_id", "payload", "tenant_id", "queue", "priority", "run_at")):
            rows.append(EnqueuedJob(**{**entry, "state": "staged", "attempt": 0,
                                       "payload": jsoncodec.loads(entry["payload"])}))
    return [row for row in rows if jsoncodec.contains(row["payload"], wanted)]


def assert_enqueued(handle: JobHandle[..., Any], *, count: int | None = None,
                    states: tuple[str, ...] | None = None, **input: Any) -> list[EnqueuedJob]:
    """Assert that ``handle`` has a live job (exactly ``count`` when given; ``states`` to look
    elsewhere) whose payload matches ``input``; answer the matching rows."""
    found = enqueued(handle, states=states, **input)
    if count is None and not found:
        raise AssertionError(f"no {handle.name} job {_describe(input)} in states {states or 'live'}; "
                             f"enqueued: {[r['payload'] for r in enqueued(handle, states=states)]}")
    if count is not None and len(found) != count:
        raise AssertionError(f"expected {count} {handle.name} job(s) {_describe(input)}, found {len(found)}")
    return found


def assert_not_enqueued(handle: JobHandle[..., Any], *, states: tuple[str, ...] | None = None,
                        **input: Any) -> None:
    """Assert that no job of ``handle`` (in any state by default) has a payload matching ``input``."""
    found = enqueued(handle, states=STATES if states is None else states, **input)
    if found:
        raise AssertionError(f"{len(found)} {handle.name} job(s) {_describe(input)} were enqueued: "
                             f"{[str(r['id']) for r in found]}")


def _describe(input: Mapping[str, Any]) -> str:
    return "with " + ", ".join(f"{k}={v!r}" for k, v in input.items()) if input else "at all"

