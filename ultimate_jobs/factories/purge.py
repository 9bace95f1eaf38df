"""``purge()``: a job that deletes what has expired, one durable step per target.

Usage::

    # myapp/jobs.py
    from ultimate_jobs import purge, task

    class ExpiredSessions:
        name = "sessions"                      # the step is "purge:sessions"

        def purge_expired(self, now):          # -> a JSON count: an int or a dict
            return Session.objects.filter(expire_date__lt=now).delete()[0]

    nightly_purge = purge(name="myapp.purge", targets=[ExpiredSessions(), AuditEntry])
    task(name="myapp.purge", cron="0 4 * * *", tz="UTC", job=nightly_purge)

    nightly_purge.enqueue()                    # a pass now; it takes no input

A *target* is any object with a callable ``purge_expired(now) -> int | dict``: an instance, a
class (or Django model) whose ``purge_expired`` is a ``@classmethod`` or ``@staticmethod``, a
model whose default manager has one, or a manager. Its label is its ``name`` attribute when that
is a string, else its class's name (a model's name for a model or manager); labels are unique.

A pass reads the clock once (``clock.now()``; frozen in tests), records it as the step
``now`` so a retried run keeps it, then calls each target in order in its own step
``purge:<label>`` with that ``now``; the step's output is what the target returned. A target
that raises fails its step and the job retries per ``retry=``; the targets already done replay
from storage and are not called again. The job's result is
``{"name": name, "now": "<ISO time>", "targets": {label: output, ...}}``.

Options (default): ``name`` (required: the job's name and its idempotency key, so one pass of
a purge is live at a time), ``targets`` (required, at least one), ``tenant`` (``NO_TENANT``),
``queue`` ("default"), ``retry`` (None: ``Retry()``), ``timeout`` (None). A target that works in
batches may call ``cancelled()`` between them (``from ultimate_jobs.factories.purge import cancelled``) to
stop early when the run is cancelled (a draining worker, an operator's cancel).

Refusals at declaration: ``X_JOB_DECLARATION_INVALID`` (a bad name, no targets, a target without
a callable ``purge_expired(now)``, two targets with one label) and ``X_JOB_DUPLICATE`` (the name
is declared by another module, or by an ``@job``).
"""

from __future__ import annotations

import contextvars
import inspect
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import TypedDict

from django.db.models.manager import BaseManager

from ultimate_jobs import clock
from ultimate_jobs.context import CancelToken, JobContext
from ultimate_jobs.durations import Duration
from ultimate_jobs.errors import X_JOB_DECLARATION_INVALID, JobsError
from ultimate_jobs.factories.kit import declare, literal_key
from ultimate_jobs.handle import JobHandle
from ultimate_jobs.inputs import NO_TENANT, Tenant
from ultimate_jobs.names import check_job_name
from ultimate_jobs.retry import Retry

STEP_PREFIX = "purge:"
CLOCK_STEP = "now"
MAX_LABEL_CHARS = 200 - len(STEP_PREFIX)  # a step name is at most 200 characters

# The cancel token of the purge run on this thread, for cancelled(); set only while its body runs.
_running: contextvars.ContextVar[CancelToken | None] = contextvars.ContextVar("purge_run", default=None)


# A target's purge_expired(now): what it answers (an int or a dict of counts) is its step's output.
PurgeMethod = Callable[[datetime], object]


class PurgeResult(TypedDict):
    """A pass's result: the purge's name, the clock reading every target was given (ISO), and
    each target's output by label."""

    name: str
    now: str
    targets: dict[str, object]


def cancelled() -> bool:
    """Whether the purge run calling this target was cancelled; False outside a run."""
    token = _running.get()
    return token is not None and token.is_set()


def purge(*, name: str, targets: Iterable[object], tenant: Tenant = NO_TENANT, queue: str = "default",
          retry: Retry | int | None = None, timeout: Duration | None = None) -> JobHandle[[], PurgeResult]:
    """Declare a purge job; see the module docstring for targets, the result and every refusal."""
    name = check_job_name(name)
    resolved = _resolve_targets(name, targets)

    def body(ctx: JobContext, /) -> PurgeResult:
        reset = _running.set(ctx.cancelled)
        try:
            stamp = ctx.step.run(CLOCK_STEP, clock.now)  # its stored form: the same on every attempt
            now = datetime.fromisoformat(stamp)
            outputs = {label: ctx.step.run(STEP_PREFIX + label, _call(fn, now)) for label, fn in resolved}
        finally:
            _running.reset(reset)
        return {"name": name, "now": stamp, "targets": outputs}

    return declare(body, label=f"purge({name!r})", function_name="purge",
                   doc=f"Purge the expired rows of {', '.join(label for label, _ in resolved)}.", name=name,
                   idempotency_key=literal_key(name), tenant=tenant, queue=queue, retry=retry, timeout=timeout)


def _call(fn: PurgeMethod, now: datetime) -> Callable[[], object]:
    return lambda: fn(now)


def _refuse(name: str, cause: str, fix: str) -> JobsError:
    return JobsError(X_JOB_DECLARATION_INVALID, f"purge {name!r}: {cause}", fix)


def _resolve_targets(name: str, targets: object) -> list[tuple[str, PurgeMethod]]:
    """Each target's ``(label, purge_expired)``; refuse what cannot be called as ``purge_expired(now)``."""
    if isinstance(targets, str | bytes | Mapping) or not isinstance(targets, Iterable):
        raise _refuse(name, f"targets={targets!r} is not a list of targets.",
                      "Pass targets=[...]: objects with a purge_expired(now) method.")
    resolved: list[tuple[str, PurgeMethod]] = []
    for target in list(targets):
        label = _label(name, target)
        method = _purge_method(name, target, label)
        if any(label == seen for seen, _ in resolved):
            raise _refuse(name, f"two targets share the label {label!r} (a label names the target's step).",
                          "Give each target its own name = \"...\" attribute.")
        resolved.append((label, method))
    if not resolved:
        raise _refuse(name, "targets is empty; a purge needs something to purge.",
                      "Pass at least one target with a purge_expired(now) method.")
    return resolved


def _label(name: str, target: object) -> str:
    if isinstance(target, BaseManager) and isinstance(target.model, type):
        return target.model.__name__  # a manager's own name is "objects": label it by its model
    own = getattr(target, "name", None)  # a model's ``name`` field is a descriptor, not a string
    if isinstance(own, str):
        if not 1 <= len(own) <= MAX_LABEL_CHARS or not own.isprintable():
            raise _refuse(name, f"a target has name={own!r}, which is not 1-{MAX_LABEL_CHARS} printable "
                          "characters.", "Give the target a short name = \"...\" attribute.")
        return own
    return target.__name__ if isinstance(target, type) else type(target).__name__


def _purge_method(name: str, target: object, label: str) -> PurgeMethod:
    fix = ("Give the target a purge_expired(now) method (a @classmethod on a class or model), or pass an "
           "instance.")
    method = _bound(target)
    if method is None and isinstance(target, type):
        manager = getattr(target, "_default_manager", None)  # a Django model whose manager purges
        method = None if manager is None else _bound(manager)
    if method is None:
        raise _refuse(name, f"target {label!r} has no callable purge_expired(now).", fix)
    try:
        inspect.signature(method).bind(None)
    except TypeError:
        raise _refuse(name, f"target {label!r}: purge_expired{inspect.signature(method)} cannot be called as "
                      "purge_expired(now).", fix) from None
    except ValueError:  # no signature to read (a builtin): trust it
        pass
    return method


def _bound(target: object) -> PurgeMethod | None:
    """``target.purge_expired`` when calling it passes ``now`` first (not a class's instance method)."""
    method: object = getattr(target, "purge_expired", None)
    if not callable(method):
        return None
    if isinstance(target, type):
        try:
            raw = inspect.getattr_static(target, "purge_expired")
        except AttributeError:
            raw = None
        if inspect.isfunction(raw):
            return None  # an instance method looked up on its class: ``now`` would land in ``self``
    return method
