"""Internal: named fault points, so crash tests can stop a real process at an exact line.

A point does nothing unless armed. A process arms points from its environment, read once::

    export ULTIMATE_JOBS_FAULTS="scheduler_after_fire=kill,leader_before_renew=sleep:3"
    python manage.py jobs_scheduler

Actions: ``sleep:<seconds>`` (stall there), ``raise`` (raise ``FaultInjected``), ``kill``
(SIGKILL this process: no ``finally``, no handler, like a power cut). Tests in one process use
``armed({...})``, which also takes a callable. Unknown points or actions are refused
(``X_CONFIG_INVALID``) so a typo cannot make a crash test pass by testing nothing.

Points: ``scheduler_after_fire`` (an occurrence's jobs and watermark just committed),
``leader_before_renew`` (a leader is about to renew its lease).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable, Iterator, Mapping

from .errors import X_CONFIG_INVALID, JobsError

log = logging.getLogger("ultimate_jobs")

ENV = "ULTIMATE_JOBS_FAULTS"
POINTS = frozenset({"scheduler_after_fire", "leader_before_renew"})
Action = str | Callable[[], None]
_armed: dict[str, Action] | None = None


class FaultInjected(RuntimeError):
    """Raised by a point armed with ``raise``."""


def _check(point: str, action: Action) -> Action:
    if point not in POINTS:
        raise JobsError(X_CONFIG_INVALID, f"{ENV} names an unknown fault point {point!r}.",
                        f"Use one of {', '.join(sorted(POINTS))}.")
    if callable(action) or action in ("raise", "kill"):
        return action
    if action.startswith("sleep:"):
        try:
            float(action[6:])
        except ValueError:
            pass
        else:
            return action
    raise JobsError(X_CONFIG_INVALID, f"{ENV}: {point}={action!r} is not an action.",
                    'Use "sleep:<seconds>", "raise" or "kill".')


def _from_env() -> dict[str, Action]:
    found: dict[str, Action] = {}
    for part in os.environ.get(ENV, "").split(","):
        if part.strip():
            point, _, action = part.strip().partition("=")
            found[point] = _check(point, action)
    return found


def point(name: str) -> None:
    """Run the action armed at ``name``, if any."""
    global _armed
    if _armed is None:
        _armed = _from_env()
    action = _armed.get(name)
    if action is None:
        return
    log.warning("jobs.fault point=%s action=%s", name, action if isinstance(action, str) else "callable")
    if callable(action):
        action()
    elif action == "raise":
        raise FaultInjected(name)
    elif action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    else:
        time.sleep(float(action[6:]))


@contextlib.contextmanager
def armed(actions: Mapping[str, Action]) -> Iterator[None]:
    """Arm points for the duration of a ``with`` block (in-process tests)."""
    global _armed
    before = _armed
    _armed = {**(before if before is not None else _from_env()),
              **{name: _check(name, action) for name, action in actions.items()}}
    try:
        yield
    finally:
        _armed = before
