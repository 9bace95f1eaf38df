"""Test-only fault hooks: named points in the code where a crash test can strike.

Usage (a worker subprocess in a test; production never sets the variables)::

    env = {"ULTIMATE_JOBS_FAULTS": "after_claim=kill", "ULTIMATE_JOBS_FAULTS_ARMED": "1"}
    env = {"ULTIMATE_JOBS_FAULTS": "before_ack=sleep:5,scheduler_after_fire=raise@2",
           "ULTIMATE_JOBS_FAULTS_ARMED": "1"}

    with faults.armed({"scheduler_after_fire": callback}):              # in-process tests
        ...

Options: ``ULTIMATE_JOBS_FAULTS`` is read once per process, when the worker, the relay or the
scheduler starts (``load()``, from ``ServiceLoop``), before anything is claimed: comma-separated
``point=action`` pairs. Actions: ``kill`` (SIGKILL this process: no ``finally``, no handler,
like a power cut), ``raise`` (``FaultInjected``, an ``OperationalError``, as if the connection
dropped), ``sleep:<seconds>`` (stall there; finite and >= 0), or in-process a callable.
``point=action@N`` strikes only the Nth time the point is reached (1-based). A bad spec
(an unknown point or action, a hit number below 1, a NaN, infinite or negative sleep) is
``X_FAULTS_INVALID`` at start, so a typo can neither make a crash test pass by testing nothing
nor strand jobs a worker claimed before it got to the first point. The spec arms nothing unless
``ULTIMATE_JOBS_FAULTS_ARMED=1`` is set too (a second switch, so one stray variable in a
deployment cannot crash workers); armed, the process logs a warning at start. Unarmed, a point
is one dictionary lookup.

Points: ``after_claim``, ``before_step_body``, ``after_step_body_before_checkpoint``,
``after_checkpoint_commit``, ``before_ack``, ``relay_after_publish_before_mark``,
``scheduler_after_fire`` (an occurrence's jobs and watermark just committed),
``leader_before_renew`` (a leader is about to renew its lease). The three step points also name
their step, which ``step_observer`` sees in-process (``ultimate_jobs.testing``'s ``crash_at`` and
``crash_proof``).

Logged events: ``jobs.fault.armed`` (warning, at start), ``jobs.fault.ignored`` (warning: a spec
without the second switch), ``jobs.fault.struck``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping

from django.db import OperationalError

from ultimate_jobs.errors import X_FAULTS_INVALID, JobsError

log = logging.getLogger("ultimate_jobs")

ENV = "ULTIMATE_JOBS_FAULTS"
ARMED_ENV = "ULTIMATE_JOBS_FAULTS_ARMED"
POINTS = frozenset({
    "after_claim", "before_step_body", "after_step_body_before_checkpoint", "after_checkpoint_commit",
    "before_ack", "relay_after_publish_before_mark", "scheduler_after_fire", "leader_before_renew",
})
Action = str | Callable[[], None]

_armed: dict[str, tuple[Action, int | None]] | None = None
_hits: dict[str, int] = {}
_lock = threading.Lock()
# How ``ultimate_jobs.testing`` (``crash_at``, ``crash_proof``) watches the step boundaries a run
# crosses: called with ``(point, step)`` at a step's fault point, before any armed action, and
# free to raise there (a crash scoped to one step). None unless a testing helper is in use.
step_observer: Callable[[str, str], None] | None = None


class FaultInjected(OperationalError):
    """Raised by a point armed with ``raise``: looks like a dropped connection to the code under test."""


def _check(point: str, action: Action) -> tuple[Action, int | None]:
    if point not in POINTS:
        raise JobsError(X_FAULTS_INVALID, f"{ENV} names an unknown fault point {point!r}.",
                        f"Use one of {', '.join(sorted(POINTS))}.")
    if callable(action):
        return action, None
    nth = None
    if "@" in action:
        action, _, count = action.partition("@")
        if not count.isdigit() or int(count) < 1:
            raise JobsError(X_FAULTS_INVALID, f"{ENV}: {point}={action}@{count} needs a hit number >= 1.")
        nth = int(count)
    if action in ("raise", "kill"):
        return action, nth
    if action.startswith("sleep:"):
        try:
            seconds = float(action[6:])
        except ValueError:
            pass
        else:
            if math.isfinite(seconds) and seconds >= 0:
                return action, nth
            raise JobsError(X_FAULTS_INVALID, f"{ENV}: {point}={action!r} sleeps a NaN, infinite or negative time.",
                            'Use "sleep:<seconds>" with a finite number >= 0.')
    raise JobsError(X_FAULTS_INVALID, f"{ENV}: {point}={action!r} is not an action.",
                    'Use "sleep:<seconds>", "raise" or "kill", optionally "@N".')


def _parse(spec: str) -> dict[str, tuple[Action, int | None]]:
    found: dict[str, tuple[Action, int | None]] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        point, _, action = part.partition("=")
        found[point] = _check(point, action)
    return found


def _from_environment() -> dict[str, tuple[Action, int | None]]:
    spec = os.environ.get(ENV, "")
    found = _parse(spec)  # a bad spec is refused even unarmed: it is a typo either way
    if not found:
        return {}
    if os.environ.get(ARMED_ENV) != "1":
        log.warning("jobs.fault.ignored %s=%r is set but %s is not 1: no fault point is armed", ENV, spec, ARMED_ENV)
        return {}
    log.warning("jobs.fault.armed points=%s pid=%s: this process will fail on purpose at those points (a crash "
                "test); never set %s in production", ",".join(sorted(found)), os.getpid(), ARMED_ENV)
    return found


def load() -> None:
    """Read ``ULTIMATE_JOBS_FAULTS`` once per process; a service calls this as it starts, before any
    claim. Raise ``X_FAULTS_INVALID`` for a bad spec. Later calls do nothing."""
    global _armed
    with _lock:
        if _armed is None:
            _armed = _from_environment()
            _hits.clear()


def arm(spec: str | None) -> None:
    """Arm points from a spec string (in-process tests: no second switch needed); ``None`` reads
    the environment again, as ``load()`` does at start."""
    global _armed
    with _lock:
        _armed = _from_environment() if spec is None else _parse(spec)
        _hits.clear()


@contextlib.contextmanager
def armed(actions: Mapping[str, Action]) -> Iterator[None]:
    """Arm points for the duration of a ``with`` block (in-process tests)."""
    global _armed
    load()
    before = _armed
    _armed = {**(before or {}), **{name: _check(name, action) for name, action in actions.items()}}
    try:
        yield
    finally:
        _armed = before


def fault(point: str, *, step: str | None = None) -> None:
    """Strike at ``point`` if a test armed it; otherwise do nothing. ``step`` names the step whose
    boundary ``point`` is (``step_observer`` sees it)."""
    if step is not None and step_observer is not None:
        step_observer(point, step)
    if _armed is None:
        load()  # a process that started no service (a script, an in-process test)
    armed_action = _armed.get(point) if _armed is not None else None
    if armed_action is None:
        return
    action, nth = armed_action
    with _lock:
        _hits[point] = _hits.get(point, 0) + 1
        if nth is not None and _hits[point] != nth:
            return
    log.warning("jobs.fault.struck point=%s action=%s pid=%s", point,
                action if isinstance(action, str) else "callable", os.getpid())
    if callable(action):
        action()
    elif action == "raise":
        raise FaultInjected(f"fault injected at {point}")
    elif action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    else:
        time.sleep(float(action[6:]))
