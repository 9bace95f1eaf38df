"""``consumer()``: read a stream (a queue, a change feed, a vendor's cursor) as one job per key,
with a supervising task that keeps every key running.

Usage::

    # shop/jobs.py
    from django.db import connections, transaction
    from ultimate_jobs import consumer

    def save_cursor(key, next_cursor):               # runs in the same transaction as handle
        Cursor.objects.update_or_create(key=key, defaults={"value": next_cursor})

    sync_orders = consumer(
        name="sync-orders",
        tenant=lambda key: key,                       # or NO_TENANT
        keys=lambda: list(Account.objects.filter(connected=True).values_list("slug", flat=True)),
        open=lambda key, cursor, cancel: vendor.stream(key, after=cursor),   # any iterator of items
        handle=lambda items, key: upsert_orders(items) or items[-1]["cursor"],  # the cursor past them
        cursor=(lambda key: Cursor.objects.filter(key=key).values_list("value", flat=True).first(), save_cursor),
        batch=100, rearm="1m", lag=lambda key, cursor: vendor.behind(key, cursor))

Options (default): ``name`` (required: the per-key job; ``<name>.arm`` and the task
``<name>.supervisor`` are declared beside it), ``tenant`` (required: ``NO_TENANT``, or as
``@job``'s over ``key``), ``keys`` (required: ``callable() -> list of str``, the keys that should be
running), ``open`` (required: ``callable(*, key, cursor, cancel) -> iterator of items``), ``handle``
(required: ``callable(items, *, key) -> next cursor``), ``cursor`` (required: a pair ``(load(key),
save(key, next))``), ``batch`` (100 items), ``rearm`` ("1m": whole minutes dividing an hour, UTC),
``lag`` (None: ``callable(*, key, cursor) -> int`` items behind), ``queue`` ("default"),
``retry`` (``Retry()``).

How it runs: ``<name>`` takes ``key``; its idempotency key is ``consumer:<name>:<key>`` (one
live row per key) and its fleet concurrency is one per key, ``when_busy="wait"`` (one running body
per key, on any number of workers). A run loads the cursor, opens the stream and commits a batch
at a time: ``handle(items, key=)`` and ``save(key, next)`` run in ONE ``transaction.atomic()`` (the
default database), so the cursor moves exactly when the batch's database effects commit. A batch
is ``batch`` items, or fewer once no next item came for 50 ms (``LINGER``), so a quiet stream never
holds read, uncommitted items. The run has no timeout: it ends when the stream ends, or when a
drain stops it (``X_DRAINING``: the batch in hand is dropped, the attempt is not counted, the job
goes back to ``ready``, and the cursor stays on the last committed batch). After each batch
``lag`` feeds ``ctx.progress(items, items + lag)``; ``ops.get_job()["consumer"]`` is ``{"key",
"last_batch_at", "lag"}``. The task ``<name>.supervisor`` (cron from ``rearm``) enqueues
``<name>.arm`` (no input), which enqueues one run per key ``keys()`` answers: a no-op for a key
that is live (deduplicated), a restart for one whose run ended or died. Delivery is at least
once across crashes: ``handle`` must be idempotent per item outside the database.

Refused: ``X_CONSUMER_INVALID`` at ``consumer()`` (a missing callable, no ``cursor`` pair,
``timeout=``, a ``batch`` that is not a whole number >= 1, a ``rearm`` that is not whole minutes
dividing an hour, an unknown option); ``X_CONSUMER_SELF_ENQUEUE`` (terminal) when ``open`` or
``handle`` enqueues its own consumer.

Logged events: ``jobs.consumer.batch`` (debug), ``jobs.consumer.ended``, ``jobs.consumer.armed``.
"""

from __future__ import annotations

import contextvars
import logging
import queue as queues
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypedDict, TypeVar

from django.db import connections, transaction
from django.db.models import F

from ultimate_jobs import clock
from ultimate_jobs.concurrency import Concurrency
from ultimate_jobs.conf import get_settings
from ultimate_jobs.context import CancelToken, JobContext
from ultimate_jobs.durations import Duration, to_seconds
from ultimate_jobs.errors import X_CONSUMER_INVALID, X_CONSUMER_SELF_ENQUEUE, Terminal
from ultimate_jobs.errors import JobsError as _JobsError
from ultimate_jobs.factories.kit import (
    declare,
    is_whole,
    missing_tenant,
    named,
    optional_callable,
    require_callable,
    whole_number,
)
from ultimate_jobs.handle import AnyJobHandle, BoundJob, JobHandle
from ultimate_jobs.inputs import NO_TENANT, Tenant, _NoTenant
from ultimate_jobs.models import ConsumerState
from ultimate_jobs.retry import Retry
from ultimate_jobs.schedule.declarations import task

log = logging.getLogger("ultimate_jobs")

LINGER = 0.05  # seconds a partly filled batch waits for its next item before it commits
POLL = 0.1  # how often a wait for the first item of a batch looks at the cancel token
_END = object()

# The consumer whose open/handle is running on this thread (its own enqueue is refused there).
_inside: contextvars.ContextVar[str | None] = contextvars.ContextVar("ultimate_jobs_consumer", default=None)

Cursor = TypeVar("Cursor")
# A consumer's tenant: NO_TENANT, a tenant id, or callable(key) -> the key's tenant.
ConsumerTenant = str | Callable[[str], str | int] | _NoTenant


class ConsumerResult(TypedDict):
    """A per-key run's result, when its stream ended: the key, the batches and items committed."""

    key: str
    batches: int
    items: int


class ArmResult(TypedDict):
    """``<name>.arm``'s result: the keys ``keys()`` answered, and how many runs it started."""

    keys: int
    started: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Consumer:
    name: str
    handle: AnyJobHandle
    arm: AnyJobHandle
    keys: Callable[[], Iterable[str]]
    open: Callable[..., Iterable[object]]
    handle_batch: Callable[..., object]
    load: Callable[[str], object]
    save: Callable[[str, Any], object]  # the cursor load answered, or handle_batch's next one
    batch: int
    lag: Callable[..., int | None] | None


_by_name: dict[str, Consumer] = {}


def status(name: str, key: Any) -> dict[str, Any] | None:
    """``{"key", "last_batch_at", "lag"}`` for a consumer's key, or None for any other job."""
    row = ConsumerState.objects.using(get_settings().DATABASE).filter(name=name, key=str(key)).values(
        "last_batch_at", "lag").first()
    if row is None and name not in _by_name:
        return None
    last = row["last_batch_at"] if row else None
    return {"key": key, "last_batch_at": last.isoformat().replace("+00:00", "Z") if last else None,
            "lag": row["lag"] if row else None}


class _Reader:
    """Pulls the app's iterator on a thread of its own, so a batch can stop waiting (linger, drain)
    while ``next()`` blocks; at most one batch of items is read ahead."""

    def __init__(self, items: Iterator[object], size: int, name: str) -> None:
        self.queue: queues.Queue[Any] = queues.Queue(maxsize=size)
        self.stop = threading.Event()
        context = contextvars.copy_context()
        self.thread = threading.Thread(target=context.run, args=(self._pull, items), daemon=True,
                                       name=f"consumer-reader[{name}]")
        self.thread.start()

    def _pull(self, items: Iterator[object]) -> None:
        try:
            for item in items:
                while not self.stop.is_set():
                    try:
                        self.queue.put(item, timeout=POLL)
                        break
                    except queues.Full:
                        continue
                if self.stop.is_set():
                    return
            self.queue.put((_END, None))
        except Exception as exc:  # handed to the run, which fails (and retries) with it
            self.queue.put((_END, exc))
        finally:
            connections.close_all()  # an iterator reading the database did it on this thread's connection

    def next_batch(self, size: int, cancel: CancelToken) -> tuple[list[Any], bool]:
        """Up to ``size`` items (waiting for the first, lingering after it); and whether the stream ended."""
        items: list[Any] = []
        deadline: float | None = None
        while len(items) < size:
            if cancel.is_set():
                cancel.check()
            wait = POLL if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                item = self.queue.get(timeout=wait)
            except queues.Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    return items, False
                continue
            if isinstance(item, tuple) and len(item) == 2 and item[0] is _END:
                if item[1] is not None:
                    raise item[1]
                return items, True
            items.append(item)
            deadline = time.monotonic() + LINGER
        return items, False


def run(spec: Consumer, ctx: JobContext, key: str) -> ConsumerResult:
    token = _inside.set(spec.name)
    try:
        cursor = spec.load(key)
        reader = _Reader(iter(spec.open(key=key, cursor=cursor, cancel=ctx.cancelled)), spec.batch, spec.name)
        batches = done = 0
        try:
            while True:
                items, ended = reader.next_batch(spec.batch, ctx.cancelled)
                if items:
                    cursor = _commit(spec, ctx, key, items)
                    batches, done = batches + 1, done + len(items)
                    _report(spec, ctx, key, cursor, done)
                if ended:
                    break
        finally:
            reader.stop.set()
    finally:
        _inside.reset(token)
    log.info("jobs.consumer.ended name=%s key=%s batches=%s items=%s", spec.name, key, batches, done)
    return {"key": key, "batches": batches, "items": done}


def _commit(spec: Consumer, ctx: JobContext, key: str, items: list[Any]) -> object:
    """``handle`` and ``save`` in one transaction, with this key's report row."""
    with transaction.atomic():
        following = spec.handle_batch(items, key=key)
        spec.save(key, following)
        alias = get_settings().DATABASE
        rows = ConsumerState.objects.using(alias)
        now = clock.now()
        if not rows.filter(name=spec.name, key=key).update(batches=F("batches") + 1, items=F("items") + len(items),
                                                          last_batch_at=now):
            rows.create(name=spec.name, key=key, batches=1, items=len(items), last_batch_at=now)
    log.debug("jobs.consumer.batch name=%s key=%s items=%s", spec.name, key, len(items))
    return following


def _report(spec: Consumer, ctx: JobContext, key: str, cursor: object, done: int) -> None:
    if spec.lag is None:
        ctx.progress(done)
        return
    behind = spec.lag(key=key, cursor=cursor)
    behind = behind if is_whole(behind, 0) else None
    ConsumerState.objects.using(get_settings().DATABASE).filter(name=spec.name, key=key).update(lag=behind)
    ctx.progress(done, None if behind is None else done + behind)


def _arm(spec: Consumer) -> ArmResult:
    keys = [str(k) for k in spec.keys()]
    results = spec.handle.enqueue_many([{"key": k} for k in keys]) if keys else []
    started = sum(1 for r in results if not r.deduped)
    log.info("jobs.consumer.armed name=%s keys=%s started=%s", spec.name, len(keys), started)
    return {"keys": len(keys), "started": started}


def _cron(rearm: Duration, owner: str) -> str:
    try:
        seconds = to_seconds(rearm, subject="rearm", code=X_CONSUMER_INVALID)
    except _JobsError:
        seconds = -1.0
    minutes = seconds / 60
    if not (seconds > 0 and minutes.is_integer() and 60 % int(minutes) == 0):
        raise _JobsError(X_CONSUMER_INVALID, f"{owner}: rearm={rearm!r} is not whole minutes dividing an hour.",
                         'Use "1m", "5m", "15m", "30m" or "1h".')
    step = int(minutes)
    return "0 * * * *" if step == 60 else "* * * * *" if step == 1 else f"*/{step} * * * *"


def _guard(handle: AnyJobHandle, name: str) -> None:
    """Refuse the consumer's own enqueue from inside its open/handle: it would dedupe onto the
    running row and arm nothing."""
    using = handle.using

    def guarded(**options: Any) -> BoundJob[..., Any]:
        if _inside.get() == name:
            raise Terminal(f"consumer {name!r}: open/handle enqueued the consumer itself.",
                           code=X_CONSUMER_SELF_ENQUEUE)
        return using(**options)

    handle.using = guarded  # type: ignore[method-assign]  # enqueue and enqueue_many go through using


def consumer(*, name: str, tenant: ConsumerTenant | None = None,  # noqa: A002
             keys: Callable[[], Iterable[str]] | None = None, open: Callable[..., Iterable[object]] | None = None,
             handle: Callable[..., Cursor] | None = None,
             cursor: tuple[Callable[[str], Cursor], Callable[[str, Cursor], object]] | None = None,
             batch: int = 100, rearm: Duration = "1m", lag: Callable[..., int | None] | None = None,
             queue: str = "default", retry: Retry | int | None = None,
             **unknown: object) -> JobHandle[..., ConsumerResult]:
    """Declare a consumer; see the module docstring for every option and refusal.

    ``open(*, key, cursor, cancel)`` answers the items, ``handle(items, *, key)`` the cursor past
    them (what ``cursor``'s ``save(key, next)`` stores and its ``load(key)`` answers), ``lag(*, key,
    cursor)`` how far behind the key is. The handle's input, ``key=``, is keyword-only, which no
    ParamSpec literal spells: it answers ``JobHandle[..., ConsumerResult]``."""
    code = X_CONSUMER_INVALID
    name, owner = named("consumer", name)
    if unknown:
        why = "a consumer has no timeout: a run ends with its stream or a drain" if "timeout" in unknown else \
            "unknown option(s)"
        raise _JobsError(code, f"{owner}: {why} ({', '.join(sorted(unknown))}).")
    if tenant is None:
        raise missing_tenant(owner=owner, code=code, fix="Pass tenant=NO_TENANT or tenant=lambda key: key.")
    keys = require_callable(keys, owner=owner, option="keys", code=code)
    open = require_callable(open, owner=owner, option="open", code=code)
    handle = require_callable(handle, owner=owner, option="handle", code=code)
    if not (isinstance(cursor, tuple | list) and len(cursor) == 2 and all(callable(c) for c in cursor)):
        raise _JobsError(code, f"{owner}: cursor={cursor!r} is not a (load(key), save(key, next)) pair.")
    batch = whole_number(batch, owner=owner, option="batch", unit="items", code=code,
                         fix="Set batch=100 (items per transaction), or leave it out.")
    lag = optional_callable(lag, owner=owner, option="lag", code=code)
    cron = _cron(rearm, owner)
    declared: dict[str, Consumer] = {}

    def consume(ctx: JobContext, /, *, key: str) -> ConsumerResult:
        return run(declared["self"], ctx, key)

    def arm(ctx: JobContext, /) -> ArmResult:
        return _arm(declared["self"])

    job_tenant: Tenant
    if isinstance(tenant, str | _NoTenant):
        job_tenant = tenant
    else:
        tenant_of = tenant
        job_tenant = lambda key: tenant_of(key)  # noqa: E731 - @job renders a tenant by keyword: key=
    per_key = declare(consume, label=f"consumer[{name}]", name=name, tenant=job_tenant, queue=queue, retry=retry,
                      idempotency_key=lambda key: f"consumer:{name}:{key}",
                      concurrency=Concurrency(key="{key}", limit=1, when_busy="wait"))
    arm_handle = declare(arm, label=f"consumer[{name}].arm", name=f"{name}.arm", tenant=NO_TENANT, queue=queue,
                         idempotency_key=f"consumer:{name}.arm")
    task(name=f"{name}.supervisor", cron=cron, tz="UTC", job=arm_handle)
    spec = Consumer(name=name, handle=per_key, arm=arm_handle, keys=keys, open=open, handle_batch=handle,
                    load=cursor[0], save=cursor[1], batch=batch, lag=lag)
    declared["self"] = spec
    _by_name[name] = spec
    _guard(per_key, name)
    return per_key
