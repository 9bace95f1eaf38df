"""``@job``: declare a durable job, and the handle that enqueues it.

Usage::

    from ultimate_jobs import job, Retry, NO_TENANT

    @job(idempotency_key="receipt:{order_id}", tenant=lambda order_id, shop_id: shop_id,
         retry=Retry(attempts=5), queue="emails")
    def send_receipt(ctx, *, order_id: int, shop_id: str) -> None:
        ...

    send_receipt.enqueue(order_id=42, shop_id="acme")

Options (default): ``idempotency_key`` (required: a format string over the input or a
``callable(**input) -> str``), ``tenant`` (required: a callable, a format string or
``NO_TENANT``), ``name`` (``"<module>.<qualname>"``), ``queue`` ("default"), ``priority`` (0,
lower runs first), ``retry`` (``Retry()``: 3 attempts), ``timeout`` (None), ``step_timeout``
(None), ``event_poll`` (None: the ``EVENT_POLL`` setting), ``concurrency`` (None),
``compensates`` (False), ``on_settled`` (None), ``on_settled_timeout`` ("30s"), ``sensitive``
(False).

Every refusal happens here, at import time, with a code: ``X_IDEMPOTENCY_REQUIRED``,
``X_JOB_TENANT_REQUIRED``, ``X_JOB_DUPLICATE``, ``X_JOB_DECLARATION_INVALID``.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, Protocol, TypedDict, TypeVar, Unpack, overload

from ultimate_jobs.concurrency import Concurrency
from ultimate_jobs.context import JobContext
from ultimate_jobs.durations import Duration, to_seconds
from ultimate_jobs.errors import X_IDEMPOTENCY_REQUIRED, X_JOB_DECLARATION_INVALID, X_JOB_TENANT_REQUIRED, JobsError
from ultimate_jobs.handle import JobHandle
from ultimate_jobs.inputs import IdempotencyKey, Tenant
from ultimate_jobs.registry import register
from ultimate_jobs.retry import Retry

P = ParamSpec("P")
R = TypeVar("R")


class JobDecorator(Protocol):
    """What ``job(...)`` with options answers: a decorator that declares the job it is given."""

    @overload
    def __call__(self, fn: Callable[Concatenate[JobContext, P], Coroutine[Any, Any, R]], /) -> JobHandle[P, R]: ...

    @overload
    def __call__(self, fn: Callable[Concatenate[JobContext, P], R], /) -> JobHandle[P, R]: ...


class JobOptions(TypedDict, total=False):
    """``@job``'s options besides ``idempotency_key`` and ``tenant``, as a type checker reads them
    (the module docstring gives each default)."""

    name: str | None
    queue: str
    priority: int
    retry: Retry | int | None
    timeout: Duration | None
    step_timeout: Duration | None
    event_poll: Duration | None
    concurrency: Concurrency | int | None
    compensates: bool
    on_settled: Callable[..., object] | None
    on_settled_timeout: Duration
    sensitive: bool


@overload
def job(fn: Callable[Concatenate[JobContext, P], Coroutine[Any, Any, R]], /, *,
        idempotency_key: IdempotencyKey | None = None, tenant: Tenant | None = None,
        **options: Unpack[JobOptions]) -> JobHandle[P, R]: ...


@overload
def job(fn: Callable[Concatenate[JobContext, P], R], /, *, idempotency_key: IdempotencyKey | None = None,
        tenant: Tenant | None = None, **options: Unpack[JobOptions]) -> JobHandle[P, R]: ...


@overload
def job(*, idempotency_key: IdempotencyKey, tenant: Tenant, **options: Unpack[JobOptions]) -> JobDecorator: ...


def job(fn: Callable[..., Any] | None = None, *, idempotency_key: IdempotencyKey | None = None,
        tenant: Tenant | None = None, name: str | None = None,
        queue: str = "default", priority: int = 0, retry: Retry | int | None = None, timeout: Duration | None = None,
        step_timeout: Duration | None = None, event_poll: Duration | None = None,
        concurrency: Concurrency | int | None = None, compensates: bool = False,
        on_settled: Callable[..., object] | None = None, on_settled_timeout: Duration = 30.0,
        sensitive: bool = False) -> JobHandle[..., Any] | Callable[[Callable[..., Any]], JobHandle[..., Any]]:
    """Declare a durable job; see the module docstring for every option and refusal.

    ``job(fn, **options)`` declares ``fn`` at once. A bare ``@job`` type-checks but always refuses:
    every job needs an ``idempotency_key`` and a ``tenant`` (``X_IDEMPOTENCY_REQUIRED``,
    ``X_JOB_TENANT_REQUIRED``).
    """

    def declare(func: Callable[..., Any]) -> JobHandle[..., Any]:
        label = name or f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', '?')}"
        if idempotency_key is None:
            raise JobsError(X_IDEMPOTENCY_REQUIRED, f"@job {label} has no idempotency_key; every job is "
                            "deduplicated by one.")
        if tenant is None:
            raise JobsError(X_JOB_TENANT_REQUIRED, f"@job {label} has no tenant; every job says which org it "
                            "acts for.")
        if step_timeout is not None and to_seconds(step_timeout, subject="step_timeout",
                                                   code=X_JOB_DECLARATION_INVALID) <= 0:
            raise JobsError(X_JOB_DECLARATION_INVALID, "step_timeout must be positive.")
        handle: JobHandle[..., Any] = JobHandle(
            func, idempotency_key=idempotency_key, tenant=tenant, name=name, queue=queue, priority=priority,
            retry=retry, timeout=timeout, step_timeout=step_timeout, event_poll=event_poll, concurrency=concurrency,
            compensates=compensates, on_settled=on_settled, on_settled_timeout=on_settled_timeout,
            sensitive=sensitive)
        register(handle)
        return handle

    if fn is not None:
        return declare(fn)
    return declare
