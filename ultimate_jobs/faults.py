"""Internal: named fault points for crash tests. Each does nothing unless armed.

Usage::

    # a real worker process, killed right after a step's checkpoint committed
    ULTIMATE_JOBS_FAULTS="after_checkpoint_commit@charge=kill" python manage.py jobs_worker

    # in-process (tests)
    from ultimate_jobs import faults
    with faults.armed("after_checkpoint_commit@charge=operational-error*1"):
        ...

A spec is ``point[@step]=action[*count]``, several joined by commas. ``@step`` limits the fault
to one step name; ``*count`` fires it at most that many times (default: every time). Actions:
``kill`` (SIGKILL this process: no drain, no settle, no rollback message), ``raise`` (a
``RuntimeError``), ``operational-error`` (``django.db.OperationalError``, as a dropped
connection raises), ``crash`` (``SimulatedCrash``, a ``BaseException`` the in-process test
runner treats as a process death), ``sleep:<seconds>``.

Points (``steps.py``): ``before_step_body`` (a ``once`` step's ``started`` is persisted, the body
not yet called), ``after_step_body_before_checkpoint`` (the body returned; for ``atomic=True``
its writes are not committed yet), ``after_checkpoint_commit`` (the checkpoint committed).

Options (default): the ``ULTIMATE_JOBS_FAULTS`` environment variable (unset: nothing armed),
read once per process on the first hit.

Logged events: ``jobs.fault.fired`` before every action (warning; debug for ``crash``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

log = logging.getLogger("ultimate_jobs")

ENV = "ULTIMATE_JOBS_FAULTS"
POINTS = ("before_step_body", "after_step_body_before_checkpoint", "after_checkpoint_commit")


class SimulatedCrash(BaseException):
    """A process death, in-process: nothing after the fault point runs, nothing is settled.

    A ``BaseException`` so a body's ``except Exception`` cannot swallow it, as it cannot swallow
    a SIGKILL.
    """


@dataclass(slots=True)
class Fault:
    point: str
    step: str | None
    action: str
    remaining: int | None


_lock = threading.Lock()
_faults: list[Fault] | None = None  # None: the environment was not read yet
_observers: list[Callable[[str, str], None]] = []


def parse(spec: str) -> list[Fault]:
    """Parse ``point[@step]=action[*count]`` entries; raise ``ValueError`` naming a bad one."""
    faults = []
    for entry in filter(None, (part.strip() for part in spec.split(","))):
        where, sep, action = entry.partition("=")
        if not sep:
            raise ValueError(f"fault {entry!r} is not point[@step]=action")
        point, _, step = where.partition("@")
        if point not in POINTS:
            raise ValueError(f"fault point {point!r} is not one of {', '.join(POINTS)}")
        action, star, count = action.partition("*")
        if action not in ("kill", "raise", "operational-error", "crash") and not action.startswith("sleep:"):
            raise ValueError(f"fault action {action!r} is not kill, raise, operational-error, crash or sleep:<s>")
        faults.append(Fault(point, step or None, action, int(count) if star else None))
    return faults


def _armed() -> list[Fault]:
    global _faults
    if _faults is None:
        with _lock:
            if _faults is None:
                _faults = parse(os.environ.get(ENV, ""))
    return _faults


@contextlib.contextmanager
def armed(spec: str) -> Iterator[None]:
    """Arm ``spec`` in this process for the ``with`` block (replacing the environment's faults)."""
    global _faults
    before = _faults
    _faults = parse(spec)
    try:
        yield
    finally:
        _faults = before


@contextlib.contextmanager
def observe(callback: Callable[[str, str], None]) -> Iterator[None]:
    """Call ``callback(point, step)`` at every point reached in the block (``crash_proof`` maps the
    boundaries of a run this way)."""
    _observers.append(callback)
    try:
        yield
    finally:
        _observers.remove(callback)


def hit(point: str, step: str) -> None:
    """Reached ``point`` in ``step``: fire the first armed fault that matches, if any."""
    for observer in list(_observers):
        observer(point, step)
    faults = _armed()
    if not faults:
        return
    with _lock:
        fault = next((f for f in faults if f.point == point and f.step in (None, step)
                      and (f.remaining is None or f.remaining > 0)), None)
        if fault is None:
            return
        if fault.remaining is not None:
            fault.remaining -= 1
    # A simulated crash is what crash_proof does at every boundary: routine, so debug.
    log.log(logging.DEBUG if fault.action == "crash" else logging.WARNING, "jobs.fault.fired point=%s step=%s "
            "action=%s pid=%s", point, step, fault.action, os.getpid())
    if fault.action == "kill":
        for handler in logging.getLogger("ultimate_jobs").handlers:
            handler.flush()
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(10)  # SIGKILL is delivered at once; never return into the step meanwhile
    if fault.action == "raise":
        raise RuntimeError(f"fault injected at {point} in step {step!r}")
    if fault.action == "operational-error":
        from django.db import OperationalError

        raise OperationalError(f"fault injected at {point} in step {step!r}: the connection dropped")
    if fault.action == "crash":
        raise SimulatedCrash(f"{point}@{step}")
    if fault.action.startswith("sleep:"):
        time.sleep(float(fault.action.split(":", 1)[1]))
