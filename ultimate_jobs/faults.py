"""Test-only fault hooks: named points in the code where a crash test can strike.

Usage (in a test, for a worker subprocess)::

    env = {"ULTIMATE_JOBS_FAULTS": "after_claim=kill"}            # SIGKILL right after a claim
    env = {"ULTIMATE_JOBS_FAULTS": "before_ack=sleep:5,after_checkpoint_commit=raise"}

Options: ``ULTIMATE_JOBS_FAULTS`` is read once per process: comma-separated ``point=action``
pairs. Actions: ``kill`` (SIGKILL this process), ``raise`` (``OperationalError``, as if the
connection dropped), ``sleep:<seconds>``. ``point=action@N`` strikes only the Nth time the point
is reached (1-based). Unset, every point is a dictionary lookup that does nothing: production
never arms them.

Points: ``after_claim``, ``before_step_body``, ``after_step_body_before_checkpoint``,
``after_checkpoint_commit``, ``before_ack``, ``relay_after_publish_before_mark``,
``scheduler_after_fire``, ``leader_before_renew``.

Logged events: ``jobs.fault.struck``.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time

log = logging.getLogger("ultimate_jobs")

POINTS = frozenset({
    "after_claim", "before_step_body", "after_step_body_before_checkpoint", "after_checkpoint_commit",
    "before_ack", "relay_after_publish_before_mark", "scheduler_after_fire", "leader_before_renew",
})
ENV = "ULTIMATE_JOBS_FAULTS"

_armed: dict[str, tuple[str, int | None]] | None = None
_hits: dict[str, int] = {}
_lock = threading.Lock()


def _parse(spec: str) -> dict[str, tuple[str, int | None]]:
    armed: dict[str, tuple[str, int | None]] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        point, _, action = part.partition("=")
        nth = None
        if "@" in action:
            action, _, count = action.partition("@")
            nth = int(count)
        if point not in POINTS:
            raise ValueError(f"{ENV}: unknown fault point {point!r}; known: {', '.join(sorted(POINTS))}")
        if action not in ("kill", "raise") and not action.startswith("sleep:"):
            raise ValueError(f"{ENV}: unknown action {action!r} (kill, raise, sleep:<s>)")
        armed[point] = (action, nth)
    return armed


def arm(spec: str | None) -> None:
    """Arm points from a spec string (``None``: read the environment again). Test support."""
    global _armed
    with _lock:
        _armed = _parse(spec if spec is not None else os.environ.get(ENV, ""))
        _hits.clear()


def fault(point: str) -> None:
    """Strike at ``point`` if a test armed it; otherwise do nothing."""
    if _armed is None:
        arm(None)
    assert _armed is not None
    armed = _armed.get(point)
    if armed is None:
        return
    action, nth = armed
    with _lock:
        _hits[point] = _hits.get(point, 0) + 1
        if nth is not None and _hits[point] != nth:
            return
    log.warning("jobs.fault.struck point=%s action=%s pid=%s", point, action, os.getpid())
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif action == "raise":
        from django.db import OperationalError

        raise OperationalError(f"fault injected at {point}")
    else:
        time.sleep(float(action.split(":", 1)[1]))
