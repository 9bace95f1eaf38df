"""Internal, test-only: named fault points that crash tests arm from the environment.

Usage::

    # the code under test marks a point
    faults.hit("relay_after_publish_before_mark")

    # a crash test arms it in the process it starts
    ULTIMATE_JOBS_FAULTS="relay_after_publish_before_mark=kill@3" python -m django jobs_relay

Options: ``ULTIMATE_JOBS_FAULTS`` (unset: every point does nothing) is a comma-separated list of
``point=action[@n]``. Actions: ``kill`` (SIGKILL this process: a crash with no cleanup, no
``finally``, no rollback sent), ``raise`` (``FaultInjected``), ``sleep:<seconds>`` (a stall).
``@n`` fires on the n-th hit of the point only (default: every hit). Read once per process.

Points: ``relay_after_publish_before_mark`` (``ultimate_jobs.outbox``: the jobs are inserted,
the outbox rows not yet marked, the transaction not committed).

Logged events: ``jobs.fault.fired`` (warning) just before the action, so a test log says why a
process died.

Never set it in production: it exists so the crash tests can kill a real process at an exact line.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from dataclasses import dataclass

log = logging.getLogger("ultimate_jobs")

ENV = "ULTIMATE_JOBS_FAULTS"


class FaultInjected(RuntimeError):
    """Raised by a point armed with ``raise``."""


@dataclass(slots=True)
class _Armed:
    action: str
    nth: int | None
    hits: int = 0


_armed: dict[str, _Armed] | None = None


def _parse(spec: str) -> dict[str, _Armed]:
    armed: dict[str, _Armed] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        point, _, action = part.partition("=")
        action, _, nth = action.partition("@")
        if not point or not (action in ("kill", "raise") or action.startswith("sleep:")):
            raise ValueError(f"{ENV}: {part!r} is not point=kill|raise|sleep:<seconds>[@n]")
        armed[point.strip()] = _Armed(action=action.strip(), nth=int(nth) if nth else None)
    return armed


def arm(spec: str | None) -> None:
    """Arm points from ``spec`` (the ``ULTIMATE_JOBS_FAULTS`` format); ``None`` disarms all."""
    global _armed
    _armed = _parse(spec) if spec else {}


def hit(point: str) -> None:
    """Pass the fault point ``point``: nothing happens unless a test armed it."""
    if _armed is None:
        arm(os.environ.get(ENV))
    assert _armed is not None
    armed = _armed.get(point)
    if armed is None:
        return
    armed.hits += 1
    if armed.nth is not None and armed.hits != armed.nth:
        return
    log.warning("jobs.fault.fired point=%s action=%s hit=%s pid=%s", point, armed.action, armed.hits,
                os.getpid())
    if armed.action == "kill":
        for handler in logging.getLogger("ultimate_jobs").handlers:
            handler.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    elif armed.action == "raise":
        raise FaultInjected(f"fault injected at {point}")
    else:
        time.sleep(float(armed.action.split(":", 1)[1]))
