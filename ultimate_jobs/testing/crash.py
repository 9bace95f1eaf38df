"""``crash_proof(handle, input)``: kill a run at every step boundary in turn; prove no effect repeats.

Usage::

    from ultimate_jobs.testing import crash_proof, record_effect

    @pytest.mark.django_db
    def test_checkout_survives_a_crash_anywhere(jobs_clock):
        report = crash_proof(checkout, {"order_id": 7})    # raises X_JOB_CRASH_DIVERGED on a double effect
        assert report.boundaries                            # the (point, step) pairs it crashed at

How it works: a reference run goes to its end with nothing injected, recording every step
boundary it crosses — before each step's body (``before_step_body``; for ``once=True`` its
``started`` is already stored) and after each step's checkpoint committed
(``after_checkpoint_commit``) — and the effects it caused. Then, for each boundary in turn, a
fresh run of the same input is crashed there — a ``SimulatedCrash`` (a ``BaseException``,
like a SIGKILL nothing in the body can catch) leaves the row ``running`` and settles nothing, an
``atomic=True`` step's open transaction rolls back — its lease is left to lapse (the frozen clock
moves past ``VISIBILITY_TIMEOUT`` and the rescue hands the row back, the attempt counted) and the
run resumes to its end. Sleeps are slept through by moving the clock; a run left waiting for an
event is cancelled, so the next run can take the same key.

Effects, counted per run as the difference before and after it:

- every ``record_effect(name)`` call (``ultimate_jobs.testing.record_effect``: call it where an
  external effect happens — an email, a charge — in the body or the function the step calls);
- the row count of every installed model's table outside ``ultimate_jobs`` (an ORM write that
  happened twice is one row too many; one rolled back with an ``atomic=True`` step is none);
- whatever ``effects()`` answers, when given: a ``{name: number}`` mapping (or one number) read
  before and after each run, e.g. ``lambda: {"balance": Account.objects.get(pk=1).balance}``.

A crashed run diverges when any effect grew more than in the reference run: ``X_JOB_CRASH_DIVERGED``
names the boundary, the effect and both counts. A run that *ends* differently (dead where the
reference was done: a ``once=True`` step whose outcome became unknown, a job with one attempt) is
not a double effect; it is reported in ``CrashReport.runs`` for the test to judge.

Options (default): ``effects`` (None); ``inside_steps`` (False: also crash *inside* each step,
after its body returned and before its checkpoint — a step is at-least-once, so this passes only
when every step body is itself idempotent, or ``atomic=True`` with database-only effects);
``database`` (the ``DATABASE`` setting).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from django.apps import apps

from ultimate_jobs import clock, faults
from ultimate_jobs.db import store_for
from ultimate_jobs.errors import X_JOB_CRASH_DIVERGED, JobsError
from ultimate_jobs.handle import JobHandle
from ultimate_jobs.models import Job, JobStep
from ultimate_jobs.testing.effects import recorded_effects
from ultimate_jobs.testing.frozen import frozen
from ultimate_jobs.testing.runner import Runner
from ultimate_jobs.testing.traces import Trace, trace

MAX_ROUNDS = 1_000
POINTS = ("before_step_body", "after_step_body_before_checkpoint", "after_checkpoint_commit")
_observers: list[Callable[[str, str], None]] = []


def _notify(point: str, step: str) -> None:
    for observer in list(_observers):
        observer(point, step)


@contextlib.contextmanager
def observe_boundaries(observer: Callable[[str, str], None]) -> Iterator[None]:
    """Call ``observer(point, step)`` at every step boundary a run in this process crosses inside
    the block, before its fault point; an observer may raise there (a crash scoped to one step)."""
    _observers.append(observer)
    faults.step_observer = _notify
    try:
        yield
    finally:
        _observers.remove(observer)
        if not _observers:
            faults.step_observer = None


class SimulatedCrash(BaseException):
    """A process death, in-process: nothing after the boundary runs and nothing is settled. A
    ``BaseException``, so a body's ``except Exception`` cannot swallow it (nor a SIGKILL)."""


@contextlib.contextmanager
def crash_at(point: str, step: str, *, times: int = 1) -> Iterator[list[str]]:
    """Raise ``SimulatedCrash`` at ``point`` of step ``step`` (the first ``times`` hits) inside the
    block; yields the list of boundaries it crashed at. The in-process twin of a worker started with
    ``ULTIMATE_JOBS_FAULTS="<point>=kill"``; pair it with ``Runner.lapse()`` to let the lease run out."""
    if point not in POINTS:
        raise ValueError(f"crash_at: {point!r} is not one of {', '.join(POINTS)}")
    struck: list[str] = []

    def strike(at: str, name: str) -> None:
        if at == point and name == step and len(struck) < times:
            struck.append(f"{at}@{name}")
            raise SimulatedCrash(f"{at}@{name}")

    with observe_boundaries(strike):
        yield struck
BOUNDARIES = ("before_step_body", "after_checkpoint_commit")
INSIDE = "after_step_body_before_checkpoint"


@dataclass(frozen=True, slots=True)
class CrashRun:
    point: str
    step: str
    crashed: bool  # False when the boundary was never reached in this run
    trace: Trace
    effects: dict[str, int]


@dataclass(frozen=True, slots=True)
class CrashReport:
    reference: Trace
    effects: dict[str, int]
    boundaries: list[tuple[str, str]]
    runs: list[CrashRun] = field(default_factory=list)


def crash_proof(handle: JobHandle[..., Any], input: Mapping[str, Any], *, effects: Callable[[], Any] | None = None,
                inside_steps: bool = False, database: str | None = None) -> CrashReport:
    """See the module docstring; raise ``X_JOB_CRASH_DIVERGED`` on the first double effect."""
    alias = store_for(database).alias
    points = (*BOUNDARIES, INSIDE) if inside_steps else BOUNDARIES
    with frozen():
        boundaries: list[tuple[str, str]] = []

        def seen(point: str, step: str) -> None:
            if point in points and (point, step) not in boundaries:
                boundaries.append((point, step))

        with observe_boundaries(seen):
            reference, expected = _measured(handle, input, alias, effects)
        report = CrashReport(reference=reference, effects=expected, boundaries=list(boundaries))
        for point, step in boundaries:
            with crash_at(point, step) as struck:
                result, got = _measured(handle, input, alias, effects)
            report.runs.append(CrashRun(point, step, bool(struck), result, got))
            for key in sorted(got):
                if got[key] > expected.get(key, 0):
                    raise JobsError(X_JOB_CRASH_DIVERGED, f"{handle.name}: killed at {point} of step {step!r} and "
                                    f"resumed, the effect {key!r} happened {got[key]} time(s) where an uncrashed run "
                                    f"does it {expected.get(key, 0)} time(s) (the run ended {result.state}).")
    return report


def _measured(handle: JobHandle[..., Any], input: Mapping[str, Any], alias: str,
              effects: Callable[[], Any] | None) -> tuple[Trace, dict[str, int]]:
    before = _snapshot(alias, effects)
    result = _run_to_end(handle, input, alias)
    after = _snapshot(alias, effects)
    return result, {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}


def _run_to_end(handle: JobHandle[..., Any], input: Mapping[str, Any], alias: str) -> Trace:
    """Run one fresh job of ``input`` to a terminal state, crashing wherever a fault is armed."""
    runner = Runner(alias)
    row = handle.using(database=alias).row(input)
    job_id = runner.store.job_insert_many(rows=[row], now=clock.sql_now())[0].id
    for _ in range(MAX_ROUNDS):
        state, run_at = _state(runner, job_id)
        if state in ("done", "failed", "dead", "cancelled"):
            break
        if state == "running":  # a crashed attempt: its lease must lapse first
            runner.lapse()
            continue
        if run_at > clock.now():
            if state == "suspended" and _waits_for_event(alias, job_id):
                runner.jobs().filter(id=job_id).update(state="cancelled", stop_reason="cancelled")
                break
            clock.freeze(run_at)  # a retry's delay or a sleep passes at once
        claimed = runner.claim(job_id)
        if claimed is None:
            continue
        try:
            runner.run(claimed)
        except SimulatedCrash:
            pass  # the row stays running under a dead claim: the next round lets its lease lapse
    return trace(job_id, database=alias)


def _state(runner: Runner, job_id: UUID) -> tuple[str, Any]:
    row = runner.jobs().filter(id=job_id).values("state", "run_at").get()
    return row["state"], row["run_at"]


def _waits_for_event(alias: str, job_id: UUID) -> bool:
    run_id = Job.objects.using(alias).filter(id=job_id).values_list("run_id", flat=True).get()
    return JobStep.objects.using(alias).filter(run_id=run_id, status="started", event__isnull=False,
                                               wake_at__isnull=True).exists()


def _snapshot(alias: str, effects: Callable[[], Any] | None) -> Counter[str]:
    counts: Counter[str] = Counter({f"effect:{k}": v for k, v in recorded_effects().items()})
    for model in apps.get_models():
        if model._meta.app_label == "ultimate_jobs" or not model._meta.managed or model._meta.proxy:
            continue
        counts[f"rows:{model._meta.db_table}"] = model._default_manager.using(alias).count()
    if effects is not None:
        extra = effects()
        if isinstance(extra, Mapping):
            counts.update({f"custom:{k}": v for k, v in extra.items()})
        else:
            counts["custom"] = extra
    return counts
