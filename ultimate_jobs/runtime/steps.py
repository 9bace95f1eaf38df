"""Durable steps: ``ctx.step.run``, ``ctx.step.sleep`` and ``ctx.step.wait_for_event``.

Usage::

    @job(idempotency_key="onboard:{org_id}", tenant="{org_id}", compensates=True)
    def onboard(ctx, *, org_id: str) -> dict:
        org = ctx.step.run("provision", lambda: provision(org_id), compensate=lambda o: drop(o["id"]))
        ctx.step.run("welcome-email", lambda: send_welcome(org["id"]), once=True)
        ctx.step.sleep("3d")                                   # suspends: the worker is released
        reply = ctx.step.wait_for_event("reply", "org.replied", match={"org": org_id}, timeout="7d")
        ctx.step.run("nudge", lambda: send_nudge(org["id"]) if reply is None else None)
        return {"org": org["id"]}

A step is the retry unit. ``run(name, fn)`` calls ``fn()`` and persists its JSON result before
returning; it returns the *stored JSON form*, on the first run too (a ``datetime`` comes back a
string, a tuple a list). A later attempt of the same run replays completed steps from storage
without calling ``fn``: every step of the run is read once, at the first step call (never one
query per step). A failed ``fn`` is recorded (status ``failed``, one more execution) and its
exception propagates to the body. In an ``async def`` body the same calls are coroutines over
this engine, its statements sent off the event loop (``ultimate_jobs.runtime.async_steps``).

Options (default): ``run(name, fn, *, once=False, atomic=False, compensate=None)``;
``sleep(duration)`` or ``sleep(name, duration)`` (unnamed sleeps are ``sleep:1``, ``sleep:2``...
in call order); ``wait_for_event(name, event, match=None, timeout=None, *, schema=None)``
(``schema``: a Django ``Form`` class or a validator; a payload it refuses ends the run,
terminal ``X_JOB_EVENT_INVALID``, on the hit or a replay — ``event_schema``). From ``@job``:
``step_timeout`` (None), ``event_poll`` (None: the ``EVENT_POLL`` setting, else 15 min on
PostgreSQL, where a publish wakes its waiters, and 30 s on SQLite), ``compensates`` (False).
Setting: ``MAX_STEP_OUTPUT_BYTES`` (1 MiB).

- ``once=True``: ``started`` is persisted before ``fn``; a replay that finds it started (or
  failed) without completed raises terminal ``X_STEP_OUTCOME_UNKNOWN`` and never calls ``fn``.
- ``atomic=True``: ``fn`` runs inside ``transaction.atomic()`` on the jobs database together with
  the checkpoint: its ORM writes on that database and the stored result commit together or not at
  all. External calls inside it stay at-least-once.
- ``compensate=undo``: ``undo(output)`` runs if the run fails for good (``ultimate_jobs.runtime.compensation``).

Refused, terminal (the run stops, the body is not re-run in a loop, and a body that catches the
error still ends with it): a name used twice in one run (``X_STEP_DUPLICATE``), a reserved name
(``unwinding``, ``compensate:*``) or ``compensate=`` without ``@job(compensates=True)``
(``X_JOB_DECLARATION_INVALID``), an output that is not JSON, holds NaN, a NUL or a lone
surrogate, is nested too deeply or is over ``MAX_STEP_OUTPUT_BYTES``
(``X_STEP_OUTPUT_UNSERIALIZABLE``, nothing written). Suspension (``Suspension``) is a
``BaseException``: ``except Exception`` cannot swallow it, and a body that swallows it anyway
suspends all the same.

Every write is fenced: it lands only while the job is ``running`` under this attempt's claim; a
write that finds the run taken sets ``ctx.cancelled`` (``X_JOB_LEASE_LOST``) and raises
``JobCancelled``. Once ``ctx.cancelled`` is set, a step call raises its reason and step writes
are refused (``X_ABORTED``) — except that a step finished during a drain (``X_DRAINING``) still
records its checkpoint, so the next worker does not repeat it.

Step boundaries are fault points (``ultimate_jobs.faults``): ``before_step_body`` (a ``once``
step's ``started`` is stored, ``fn`` not yet called), ``after_step_body_before_checkpoint`` (``fn``
returned; an ``atomic`` step's writes are not committed yet), ``after_checkpoint_commit``.

Tracing: each step the attempt executes opens an OpenTelemetry span ``step <name>`` under the job's
span (``ultimate_jobs.tracing``); a step replayed from storage opens none. A ``sensitive=True``
job's step errors are stored and logged without their messages.

Logged events: ``jobs.step.failed`` (info), ``jobs.step.lost`` (warning: fenced out),
``jobs.step.write-failed`` (warning: a failure could not be recorded).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import DatabaseError, transaction

from ultimate_jobs import clock, faults, jsoncodec
from ultimate_jobs.conf import get_settings
from ultimate_jobs.db.store import ALREADY_COMPLETED, FENCED_OUT, StepRow
from ultimate_jobs.durations import to_seconds
from ultimate_jobs.errors import (
    X_ABORTED,
    X_DRAINING,
    X_EVENT_INVALID,
    X_JOB_DECLARATION_INVALID,
    X_JOB_LEASE_LOST,
    X_STEP_DUPLICATE,
    X_STEP_OUTCOME_UNKNOWN,
    X_STEP_OUTPUT_UNSERIALIZABLE,
    JobCancelled,
    JobsError,
    Terminal,
)
from ultimate_jobs.events import check_event_name
from ultimate_jobs.runtime import event_schema
from ultimate_jobs.runtime.event_schema import Schema
from ultimate_jobs.runtime.failures import format_error
from ultimate_jobs.tracing import record_error, step_span

if TYPE_CHECKING:
    from ultimate_jobs.context import CancelToken
    from ultimate_jobs.db.store import ClaimedJob, Store
    from ultimate_jobs.handle import AnyJobHandle

log = logging.getLogger("ultimate_jobs")

UNWIND_STEP = "unwinding"
COMPENSATE_PREFIX = "compensate:"
EVENT_POLL_WITH_WAKE = 900.0
EVENT_POLL_WITHOUT_WAKE = 30.0
MAX_NAME_CHARS = 200


def _boundary(point: str, step: str) -> None:
    faults.fault(point, step=step)


class Suspension(BaseException):
    """The run suspends here (a sleep or an event wait): control flow, never an error.

    A ``BaseException`` so ``except Exception`` cannot swallow it. The worker settles the run
    ``suspended`` with the attempt handed back, due again after ``delay`` seconds.
    """

    def __init__(self, step: str, delay: float, *, waiting: bool) -> None:
        super().__init__(f"suspended at step {step!r} for {delay:g}s")
        self.step = step
        self.delay = delay
        self.waiting = waiting  # an event wait: re-checked once the suspension settled


class ReplayEnd(BaseException):
    """Internal: an unwind's replay reached a step that never completed; the body stops there."""


class StepFront:
    """A ``ctx.step``: the documented calls over the attempt's engine (``Steps``), which stays the
    runtime's own — ``StepAPI`` in a ``def`` body, ``async_steps.AsyncStepAPI`` in an ``async def``."""

    __slots__ = ("_engine",)

    def __init__(self, engine: Steps) -> None:
        self._engine = engine

    def __repr__(self) -> str:
        return repr(self._engine)


class StepAPI(StepFront):
    """``ctx.step`` of a ``def`` body: ``run``, ``sleep``, ``wait_for_event``."""

    __slots__ = ()

    def run(self, name: str, fn: Callable[[], Any], *, once: bool = False, atomic: bool = False,
            compensate: Callable[[Any], Any] | None = None) -> Any:
        """Run ``fn()`` once ever for this run and answer its stored JSON form (see the module)."""
        return self._engine.run(name, fn, once=once, atomic=atomic, compensate=compensate)

    def sleep(self, name_or_duration: Any, duration: Any = None) -> None:
        """Suspend the run until ``duration`` has passed (on the database clock); no attempt burned."""
        self._engine.sleep(name_or_duration, duration)

    def wait_for_event(self, name: str, event: str, match: dict[str, Any] | None = None,
                       timeout: Any = None, *, schema: Schema | None = None) -> Any:
        """Suspend until ``publish_event(event, payload)`` with ``payload`` containing ``match`` is
        published after the wait began; answer the payload (checked by ``schema``: a Django ``Form``
        class or a validator, see ``event_schema``), or ``None`` once ``timeout`` passed."""
        return self._engine.wait_for_event(name, event, match, timeout, schema=schema)


def engine_of(step: StepFront) -> Steps:
    """Internal: the engine behind a ``ctx.step``, for the runtime and the factories' framework steps."""
    return step._engine


class Steps:
    """The step engine of one attempt: what ``ctx.step`` (``StepAPI``) calls, plus the reads and
    marks the unwind and the factories use (see the module docstring)."""

    def __init__(self, *, handle: AnyJobHandle, claimed: ClaimedJob, token: CancelToken, store: Store) -> None:
        self.handle = handle
        self.claimed = claimed
        self.token = token
        self.store = store
        # (step name, undo, stored output) for each completed step declaring compensate=, in order.
        self.compensators: list[tuple[str, Callable[[Any], Any], Any]] = []
        # A terminal step error or a suspension, re-raised by every later step call and read by
        # the execution path even when the body swallowed it.
        self.latched: BaseException | None = None
        self.replay_only = False  # set by the unwind: completed steps replay, anything else stops
        self._rows: dict[str, StepRow] | None = None
        self._seen: dict[str, float] = {}  # when each row's ``remaining`` was true (monotonic)
        self._used: set[str] = set()
        self._next_seq = 1
        self._sleeps = 0

    def __repr__(self) -> str:
        return f"<Steps run_id={self.claimed.run_id} used={len(self._used)}>"

    # -- the public calls ------------------------------------------------------------------------

    def run(self, name: str, fn: Callable[[], Any], *, once: bool = False, atomic: bool = False,
            compensate: Callable[[Any], Any] | None = None) -> Any:
        """Run ``fn()`` once ever for this run and answer its stored JSON form (see the module)."""
        seq, output = open_run(self, name, fn, once=once, compensate=compensate)
        if seq is not None:
            output = jsoncodec.loads(self._execute(name, seq, fn, once=once, atomic=atomic))
        if compensate is not None:
            self.compensators.append((name, compensate, output))
        return output

    def sleep(self, name_or_duration: Any, duration: Any = None) -> None:
        """Suspend the run until ``duration`` has passed (on the database clock); no attempt burned."""
        if duration is None:
            self._sleeps += 1
            name, duration = f"sleep:{self._sleeps}", name_or_duration
        else:
            name = name_or_duration
        self._enter(name)
        seconds = self._seconds(duration, f"step.sleep({name!r}) duration")
        row = self.load().get(name)
        if row is not None and row.status == "completed":
            return
        if self.replay_only:
            raise self._latch(ReplayEnd(name))
        remaining: float | None = seconds
        if row is None:
            self._begin(name, self._take_seq(), wake_in=seconds)
        else:
            remaining = self._remaining(row)
        if remaining is None or remaining <= 0:
            self._complete(name, "null")
            return
        self._suspend(name, remaining, waiting=False)

    def wait_for_event(self, name: str, event: str, match: dict[str, Any] | None = None,
                       timeout: Any = None, *, schema: Schema | None = None) -> Any:
        """Suspend until ``publish_event(event, payload)`` with ``payload`` containing ``match`` is
        published after the wait began; answer the payload (through ``schema``), or ``None`` once
        ``timeout`` passed."""
        self._enter(name)
        check_event_name(event)
        event_schema.check(schema, step=name, latch=self._latch)
        if match is not None and not isinstance(match, dict):
            raise self._latch(Terminal(f"wait_for_event({name!r}): match={match!r} must be a dict.",
                                       code=X_EVENT_INVALID))
        try:
            match_text = None if match is None else jsoncodec.dumps(match, what="match")
        except jsoncodec.NotJSON as exc:
            raise self._latch(Terminal(f"wait_for_event({name!r}): {exc}.", code=X_EVENT_INVALID)) from None
        seconds = None if timeout is None else self._seconds(timeout, f"wait_for_event({name!r}) timeout")
        row = self.load().get(name)
        if row is not None and row.status == "completed":
            return event_schema.answer(schema, jsoncodec.loads(row.output), step=name, event=event, latch=self._latch)
        if self.replay_only:
            raise self._latch(ReplayEnd(name))
        if row is None:
            self._begin(name, self._take_seq(), wake_in=seconds, event=event, match=match_text)
            row = self.load()[name]
        # The stored wait is what the publish's wake reads, so it is what is matched here too.
        found = self.store.event_find(name=row.event or event, match=row.event_match,
                                      since=row.started_at or clock.now(), tenant_id=self.claimed.tenant_id)
        if found is not None:  # stored as it arrived, then checked: a refusal shows what came
            return event_schema.answer(schema, jsoncodec.loads(self._complete(name, found)), step=name, event=event,
                                       latch=self._latch)
        remaining = self._remaining(row)
        if remaining is not None and remaining <= 0:
            self._complete(name, "null")
            return None
        poll = self.handle.event_poll or get_settings().EVENT_POLL or (
            EVENT_POLL_WITH_WAKE if self.store.supports_listen_notify else EVENT_POLL_WITHOUT_WAKE)
        self._suspend(name, poll if remaining is None else min(poll, remaining), waiting=True)

    # -- used by the unwind (ultimate_jobs.runtime.compensation) and the factories ------------------

    def completed(self, name: str) -> bool:
        """Whether step ``name`` of this run is stored completed (a replay will not run it)."""
        row = self.load().get(name)
        return row is not None and row.status == "completed"

    def load(self) -> dict[str, StepRow]:
        """Every stored step of the run, read once per attempt."""
        if self._rows is None:
            rows = self.store.step_list(run_id=self.claimed.run_id, now=clock.sql_now())
            seen = time.monotonic()
            self._rows = {row.name: row for row in rows}
            self._seen = dict.fromkeys(self._rows, seen)
            self._next_seq = max((row.seq for row in rows), default=0) + 1
        return self._rows

    def run_internal(self, name: str, fn: Callable[[], Any]) -> None:
        """Run a framework step (``compensate:<name>``) through the same checkpoint path."""
        seq = open_internal(self, name)
        if seq is not None:
            self._execute(name, seq, fn, once=False, atomic=False)

    def mark(self, name: str, output: Any) -> None:
        """Record a framework marker step (``unwinding``) as completed with ``output``."""
        if name not in self.load():
            self._complete(name, jsoncodec.dumps(output, what=name), seq=self._take_seq())

    # -- internals -------------------------------------------------------------------------------

    def _enter(self, name: object, *, internal: bool = False) -> None:
        if self.latched is not None:
            raise self.latched
        if not isinstance(name, str) or not 1 <= len(name) <= MAX_NAME_CHARS or not name.isprintable():
            raise self._latch(Terminal(f"step name {name!r} is not 1-200 printable characters.",
                                       code=X_JOB_DECLARATION_INVALID))
        if not internal and (name == UNWIND_STEP or name.startswith(COMPENSATE_PREFIX)):
            raise self._latch(Terminal(f"step name {name!r} is reserved for the compensation unwind.",
                                       code=X_JOB_DECLARATION_INVALID, fix="Rename the step."))
        if name in self._used:
            raise self._latch(Terminal(f"step name {name!r} is used twice in one run.", code=X_STEP_DUPLICATE))
        self._used.add(name)
        if self.token.is_set():
            raise self.token.error()  # a cancelled run stops at its next step boundary

    def _latch(self, error: BaseException) -> BaseException:
        self.latched = error
        return error

    def _seconds(self, value: Any, subject: str) -> float:
        try:
            return to_seconds(value, subject=subject, positive=False, code=X_JOB_DECLARATION_INVALID)
        except JobsError as err:
            raise self._latch(Terminal(err.cause, code=err.code)) from None

    def _take_seq(self) -> int:
        self.load()
        seq, self._next_seq = self._next_seq, self._next_seq + 1
        return seq

    def _remaining(self, row: StepRow) -> float | None:
        """Seconds left until the row's wake time, as of now (no clock passes while frozen)."""
        if row.remaining is None:
            return None
        elapsed = 0.0 if clock.is_frozen() else time.monotonic() - self._seen.get(row.name, time.monotonic())
        return row.remaining - elapsed

    def _remember(self, row: StepRow) -> None:
        self.load()[row.name] = row
        self._seen[row.name] = time.monotonic()

    def _suspend(self, name: str, delay: float, *, waiting: bool) -> None:
        raise self._latch(Suspension(name, max(delay, 0.0), waiting=waiting))

    def _refuse_if_cancelled(self, name: str) -> None:
        if self.token.is_set() and self.token.reason != X_DRAINING:
            raise JobCancelled(X_ABORTED, f"step {name!r}: the run was cancelled ({self.token.reason}), so its "
                               "step writes are refused.")

    def _lost(self, name: str) -> JobCancelled:
        self.token.set(X_JOB_LEASE_LOST, f"step {name!r}: the job is no longer running under this attempt's "
                       "claim (cancelled or reclaimed).")
        log.warning("jobs.step.lost job_id=%s name=%s step=%s", self.claimed.id, self.claimed.name, name)
        return self.token.error()

    def _begin(self, name: str, seq: int, *, wake_in: float | None = None, event: str | None = None,
               match: str | None = None) -> datetime:
        self._refuse_if_cancelled(name)
        started = self.store.step_begin(job_id=self.claimed.id, claim=self.claimed.claim, run_id=self.claimed.run_id,
                                        name=name, seq=seq, wake_in=wake_in, event=event, event_match=match,
                                        now=clock.sql_now())
        if started is None:
            raise self._lost(name)
        self._remember(StepRow(name, "started", None, 1, seq, started, None, wake_in, event, match))
        return started

    def _complete(self, name: str, text: str, *, seq: int | None = None, count: bool = False) -> str:
        """Checkpoint ``text`` as the step's output; answer the output the store holds."""
        row = self.load().get(name)
        seq = seq if seq is not None else (row.seq if row is not None else self._take_seq())
        self._refuse_if_cancelled(name)
        verdict = self.store.step_complete(job_id=self.claimed.id, claim=self.claimed.claim,
                                           run_id=self.claimed.run_id, name=name, seq=seq, output=text, count=count,
                                           now=clock.sql_now())
        if verdict == FENCED_OUT:
            raise self._lost(name)
        if verdict == ALREADY_COMPLETED:  # completed elsewhere: the stored answer wins
            self._rows = None
            return self.load()[name].output or "null"
        executions = (row.executions if row is not None else 0) + (1 if count else 0)
        self._remember(StepRow(name, "completed", text, executions, seq, row.started_at if row else None,
                               None, None, None, None))
        return text

    def _execute(self, name: str, seq: int, fn: Callable[[], Any], *, once: bool, atomic: bool) -> str:
        """Call ``fn`` and checkpoint its output (in one transaction when ``atomic``), inside the
        step's span: only an executed step opens one (a replayed step ran in an earlier attempt)."""
        with step_span(name) as span:
            try:
                return self._checkpointed(name, seq, fn, once=once, atomic=atomic)
            except Exception as error:
                record_error(span, error, sensitive=self.handle.sensitive)
                raise

    def _checkpointed(self, name: str, seq: int, fn: Callable[[], Any], *, once: bool, atomic: bool) -> str:
        _boundary("before_step_body", name)
        failure: list[Exception] = []
        if self.handle.step_timeout is not None:
            self.token.step_name = name
            self.token.step_deadline = time.monotonic() + self.handle.step_timeout
        try:
            if atomic:
                with transaction.atomic(using=self.store.alias):
                    text = self._call(name, fn, failure)
                    _boundary("after_step_body_before_checkpoint", name)
                    stored = self._complete(name, text, seq=seq, count=not once)
            else:
                text = self._call(name, fn, failure)
                _boundary("after_step_body_before_checkpoint", name)
                stored = self._complete(name, text, seq=seq, count=not once)
        except Exception as error:  # only fn's own failure is recorded; every error propagates
            if failure and error is failure[0]:
                self._record_failure(name, seq, error, count=not once)
            raise
        finally:
            self.token.step_deadline = self.token.step_name = None
        _boundary("after_checkpoint_commit", name)
        return stored

    def _call(self, name: str, fn: Callable[[], Any], failure: list[Exception]) -> str:
        try:
            value = fn()
        except Exception as error:  # the step failed: recorded by _execute, then the body decides
            failure.append(error)
            raise
        return encode_output(self, name, value)

    def _record_failure(self, name: str, seq: int, error: Exception, *, count: bool) -> None:
        log.info("jobs.step.failed job_id=%s name=%s step=%s error=%r", self.claimed.id, self.claimed.name, name,
                 type(error).__name__ if self.handle.sensitive else error)
        if self.token.is_set() and self.token.reason != X_DRAINING:
            return  # a cancelled run writes nothing, not even its failure
        try:
            verdict = self.store.step_fail(job_id=self.claimed.id, claim=self.claimed.claim,
                                           run_id=self.claimed.run_id, name=name, seq=seq,
                                           error=format_error(error, sensitive=self.handle.sensitive), count=count,
                                           now=clock.sql_now())
        except DatabaseError as exc:  # the body's own error matters more; the next attempt re-runs the step
            log.warning("jobs.step.write-failed job_id=%s step=%s error=%r", self.claimed.id, name, exc)
            return
        if verdict == FENCED_OUT:
            self._lost(name)
            return
        row = self.load().get(name)
        executions = (row.executions if row is not None else 0) + (1 if count else 0)
        self._remember(StepRow(name, "failed", None, executions, seq, row.started_at if row else None, None, None,
                               None, None))


def open_run(steps: Steps, name: str, fn: object, *, once: bool,
             compensate: Callable[[Any], Any] | None) -> tuple[int | None, Any]:
    """``run`` up to ``fn`` (for ``async_steps`` too): ``(None, output)`` replays, ``(seq, None)`` runs ``fn``."""
    steps._enter(name)
    if not callable(fn):
        raise steps._latch(Terminal(f"step {name!r}: fn={fn!r} is not callable.", code=X_JOB_DECLARATION_INVALID))
    if compensate is not None and not (steps.handle.compensates and callable(compensate)):
        raise steps._latch(Terminal(
            f"step {name!r} passes compensate= but {steps.handle.name} is not declared @job(compensates=True)"
            if not steps.handle.compensates else f"step {name!r}: compensate={compensate!r} is not callable.",
            code=X_JOB_DECLARATION_INVALID, fix="Declare @job(compensates=True) and pass a callable(output)."))
    row = steps.load().get(name)
    if row is not None and row.status == "completed":
        return None, jsoncodec.loads(row.output)
    if once and row is not None:
        raise steps._latch(Terminal(
            f"step {name!r} (once=True) was {row.status} without completing: its effect may or may not "
            "have happened, so it is not run again.", code=X_STEP_OUTCOME_UNKNOWN))
    if steps.replay_only:
        raise steps._latch(ReplayEnd(name))
    seq = row.seq if row is not None else steps._take_seq()
    if once:
        steps._begin(name, seq)
    return seq, None


def open_internal(steps: Steps, name: str) -> int | None:
    """``Steps.run_internal`` up to calling its ``fn``: the seq it runs as, or None when completed."""
    steps._enter(name, internal=True)
    row = steps.load().get(name)
    if row is not None and row.status == "completed":
        return None
    return row.seq if row is not None else steps._take_seq()


def encode_output(steps: Steps, name: str, value: Any) -> str:
    """A step's output as stored; latch terminal ``X_STEP_OUTPUT_UNSERIALIZABLE`` when it is not."""
    try:
        return jsoncodec.dumps(value, max_bytes=get_settings().MAX_STEP_OUTPUT_BYTES, what=f"step {name!r} output")
    except jsoncodec.NotJSON as exc:
        raise steps._latch(Terminal(f"{exc}; nothing was stored.", code=X_STEP_OUTPUT_UNSERIALIZABLE)) from None
