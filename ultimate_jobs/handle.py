"""The job handle: what ``@job`` answers — enqueue a declared job, describe it, never call it.

Usage::

    send_receipt.enqueue(order_id=42, shop_id="acme")               # -> EnqueueResult
    send_receipt.enqueue_many([{"order_id": 1, "shop_id": "acme"}])  # one statement per 1,000
    send_receipt.using(delay="10m", queue="slow").enqueue(order_id=7, shop_id="acme")
    send_receipt.parse('{"order_id": 42, "shop_id": "acme"}')       # the input as it is stored
    send_receipt.describe()                                          # the manifest row
    await send_receipt.aenqueue(order_id=42, shop_id="acme")         # from async code: the same answers
    await send_receipt.using(queue="slow").aenqueue_many([...])

``aenqueue``, ``aenqueue_many`` and ``using(...).aenqueue`` run the sync call through asgiref's
``sync_to_async`` (thread-sensitive, as Django's own async ORM calls do): the statement runs on
the request's thread for sync work, never on the event loop, which keeps running other coroutines
meanwhile. From an ``async def`` view that thread is in autocommit, so the enqueue is direct
(``OUTBOX="required"`` refuses it, ``X_OUTBOX_NO_TX``); to stage in the outbox, call ``enqueue``
inside the ``transaction.atomic()`` of a function you run with ``sync_to_async``.

Refusals: ``X_JOB_INPUT_INVALID`` (a missing, unknown or unencodable argument),
``X_JOB_ENQUEUE_BATCH_TOO_LARGE``, ``X_INVARIANT`` (an empty idempotency key),
``X_JOB_CALLED_DIRECTLY``, and ``X_JOB_DECLARATION_INVALID`` for a declaration the handle refuses.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Concatenate, Generic, NoReturn, ParamSpec, TypeAlias, TypeVar
from uuid import UUID

from asgiref.sync import sync_to_async

from ultimate_jobs import jsoncodec
from ultimate_jobs.concurrency import Concurrency
from ultimate_jobs.conf import get_settings
from ultimate_jobs.context import JobContext
from ultimate_jobs.db.store import JobRow
from ultimate_jobs.durations import Duration, to_seconds
from ultimate_jobs.enqueue import (
    MAX_ENQUEUE_BATCH,
    MAX_KEY_CHARS,
    EnqueueOptions,
    EnqueueResult,
    JobInput,
    submit,
)
from ultimate_jobs.errors import (
    X_INVARIANT,
    X_JOB_CALLED_DIRECTLY,
    X_JOB_DECLARATION_INVALID,
    X_JOB_ENQUEUE_BATCH_TOO_LARGE,
    X_JOB_INPUT_INVALID,
    JobsError,
)
from ultimate_jobs.inputs import IdempotencyKey, Template, Tenant, _NoTenant, annotation_name, input_parameters
from ultimate_jobs.names import check_job_name, check_queue_name
from ultimate_jobs.retry import Retry

P = ParamSpec("P")
R = TypeVar("R")

# Attempts a compensates=True row carries past its retry policy, so a crash on the final attempt
# is claimed once more and unwinds (see ultimate_jobs.runtime.compensation).
UNWIND_MARGIN = 2


class JobHandle(Generic[P, R]):
    """A declared job: enqueue it, describe it; never call it directly.

    Generic over the body's input parameters ``P`` (everything after ``ctx``) and its result
    ``R``, so a type checker reads ``handle.enqueue(**input)`` against the body's signature.
    """

    def __init__(self, fn: Callable[Concatenate[JobContext, P], Any], *, idempotency_key: IdempotencyKey,
                 tenant: Tenant, name: str | None, queue: str, priority: int,
                 retry: Retry | int | None, timeout: Duration | None, step_timeout: Duration | None,
                 event_poll: Duration | None, concurrency: Concurrency | int | None, compensates: bool,
                 on_settled: Callable[..., object] | None, on_settled_timeout: Duration, sensitive: bool) -> None:
        code = X_JOB_DECLARATION_INVALID
        # The body: it answers R, or for an ``async def`` body an awaitable of R.
        self.fn = fn
        self.is_async = inspect.iscoroutinefunction(fn)
        self.source = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
        self.name = check_job_name(name if name is not None else self.source)
        self.params, self.open_kwargs = input_parameters(fn, self.name)
        self.queue = check_queue_name(queue, code=code)
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise JobsError(code, f"priority={priority!r} must be an int (lower runs first).")
        self.priority = priority
        self.retry = Retry.coerce(retry)
        self.timeout = None if timeout is None else to_seconds(timeout, subject="timeout", code=code)
        self.step_timeout = None if step_timeout is None else to_seconds(step_timeout, subject="step_timeout",
                                                                          code=code)
        self.event_poll = None if event_poll is None else to_seconds(event_poll, subject="event_poll", code=code)
        self.concurrency = Concurrency.coerce(concurrency)
        if not isinstance(compensates, bool) or not isinstance(sensitive, bool):
            raise JobsError(code, "compensates= and sensitive= must be True or False.")
        self.compensates = compensates
        # The row's max_attempts: the policy's attempts, plus the unwind's margin when compensating.
        self.max_attempts = self.retry.attempts + (UNWIND_MARGIN if compensates else 0)
        self.sensitive = sensitive
        if on_settled is not None and not callable(on_settled):
            raise JobsError(code, f"on_settled={on_settled!r} is not callable.")
        self.on_settled = on_settled
        self.on_settled_timeout = to_seconds(on_settled_timeout, subject="on_settled_timeout", code=code)
        self._key = Template(idempotency_key, option="idempotency_key", params=self.params,
                              open_kwargs=self.open_kwargs)
        self.tenant = tenant
        self._tenant = None if isinstance(tenant, _NoTenant) else Template(
            tenant, option="tenant", params=self.params, open_kwargs=self.open_kwargs)
        self._concurrency_key = None
        if self.concurrency is not None and self.concurrency.key is not None:
            self._concurrency_key = Template(self.concurrency.key, option="concurrency key", params=self.params,
                                              open_kwargs=self.open_kwargs)
        self.__doc__ = fn.__doc__
        self.__name__ = getattr(fn, "__name__", self.name)
        self.__qualname__ = getattr(fn, "__qualname__", self.name)
        self.__module__ = getattr(fn, "__module__", __name__)
        self.__wrapped__ = fn

    def __repr__(self) -> str:
        return f"<JobHandle {self.name} queue={self.queue}>"

    def __call__(self, *args: object, **kwargs: object) -> NoReturn:
        raise JobsError(X_JOB_CALLED_DIRECTLY, f"The job {self.name!r} was called directly; a job runs in a "
                        "worker.", f"Use {self.__name__}.enqueue(**input), or "
                        "ultimate_jobs.testing.run_job(handle, **input) in tests.")

    # -- input -----------------------------------------------------------------------------

    def parse(self, raw: Mapping[str, Any] | str | bytes) -> dict[str, Any]:
        """Validate one input (a mapping, or its JSON text) and answer it in its stored JSON form.

        Raise ``X_JOB_INPUT_INVALID`` for a missing, unknown or unencodable argument.
        """
        if isinstance(raw, str | bytes):
            try:
                raw = jsoncodec.loads(raw)
            except ValueError as exc:
                raise JobsError(X_JOB_INPUT_INVALID, f"{self.name}: the input is not JSON ({exc}).") from None
        if not isinstance(raw, Mapping):
            raise JobsError(X_JOB_INPUT_INVALID, f"{self.name}: the input must be a mapping of keyword arguments.")
        parsed: dict[str, Any] = jsoncodec.loads(self.encode_input(raw))
        return parsed

    def encode_input(self, values: Mapping[str, Any]) -> str:
        """The stored JSON text of one input; raise ``X_JOB_INPUT_INVALID`` when it does not fit."""
        self.check_arguments(values)
        try:
            return jsoncodec.dumps(dict(values), max_bytes=get_settings().MAX_PAYLOAD_BYTES,
                                   what=f"{self.name} input")
        except jsoncodec.NotJSON as exc:
            raise JobsError(X_JOB_INPUT_INVALID, f"{exc}.") from None

    def check_arguments(self, values: Mapping[str, Any]) -> None:
        """Refuse a missing or unknown argument (``X_JOB_INPUT_INVALID``); the signature is the schema."""
        for key in values:
            if not isinstance(key, str):
                raise JobsError(X_JOB_INPUT_INVALID, f"{self.name}: input key {key!r} is not a string.")
            if key not in self.params and not self.open_kwargs:
                raise JobsError(X_JOB_INPUT_INVALID, f"{self.name}: unknown argument {key!r}; the job takes "
                                f"{', '.join(self.params) or 'no arguments'}.")
        missing = [n for n, p in self.params.items() if p.default is inspect.Parameter.empty and n not in values]
        if missing:
            raise JobsError(X_JOB_INPUT_INVALID, f"{self.name}: missing argument(s) {', '.join(missing)}.")

    def idempotency_key_for(self, **values: Any) -> str:
        """The dedupe key for this input; raise ``X_INVARIANT`` if it renders empty."""
        return self._key_of(values)

    def tenant_for(self, **values: Any) -> str | None:
        """The tenant this input acts under (``None`` for a ``NO_TENANT`` job)."""
        return self._tenant_of(values)

    def concurrency_key_for(self, **values: Any) -> str | None:
        """The fleet concurrency key; raise ``X_JOB_DECLARATION_INVALID`` if empty, not a string or > 200."""
        return self._concurrency_key_of(values)

    # The three above take the input as keywords; render() passes its mapping as it is, unpacked
    # into a new dict three times per row otherwise.

    def _key_of(self, values: Mapping[str, Any]) -> str:
        key = self._key.render(values)
        if not isinstance(key, str) or not key:
            raise JobsError(X_INVARIANT, f"{self.name}: idempotency_key rendered {key!r} for this input; a key "
                            "must be a non-empty string.", "Make the key depend on input that is never empty.")
        if len(key) > MAX_KEY_CHARS or "\x00" in key:
            raise JobsError(X_JOB_INPUT_INVALID, f"{self.name}: the idempotency key is over {MAX_KEY_CHARS} "
                            "characters or holds NUL.", "Key jobs by ids, not by content.")
        return key

    def _tenant_of(self, values: Mapping[str, Any]) -> str | None:
        if self._tenant is None:
            return None
        tenant = self._tenant.render(values)
        if isinstance(tenant, int) and not isinstance(tenant, bool):
            tenant = str(tenant)
        if not isinstance(tenant, str) or not tenant or len(tenant) > 200 or "\x00" in tenant:
            raise JobsError(X_JOB_INPUT_INVALID, f"{self.name}: tenant rendered {tenant!r}; a tenant is a "
                            "non-empty string of at most 200 characters.",
                            "Return the org's id from tenant=, or declare tenant=NO_TENANT.")
        return tenant

    def _concurrency_key_of(self, values: Mapping[str, Any]) -> str | None:
        if self.concurrency is None:
            return None
        if self._concurrency_key is None:
            return self.name
        key = self._concurrency_key.render(values)
        # The stored key is "<name>:<key>" in a 200-character column: the name's length counts too.
        if (not isinstance(key, str) or not key or len(self.name) + 1 + len(key) > 200 or "\x00" in key):
            raise JobsError(X_JOB_DECLARATION_INVALID, f"{self.name}: the concurrency key rendered {key!r:.80}; it "
                            f"must be a non-empty string without NUL of at most {199 - len(self.name)} characters "
                            "(the stored key is '<job name>:<key>', at most 200).")
        return f"{self.name}:{key}"

    def render(self, values: Mapping[str, Any]) -> JobInput:
        """One input as a row takes it: its JSON, key, tenant and concurrency key, each checked as above."""
        return JobInput(name=self.name, queue=self.queue, priority=self.priority, max_attempts=self.max_attempts,
                        payload=self.encode_input(values), idempotency_key=self._key_of(values),
                        tenant_id=self._tenant_of(values), concurrency_key=self._concurrency_key_of(values),
                        sensitive=self.sensitive)

    # -- enqueue -------------------------------------------------------------------------------

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> EnqueueResult:
        """Queue one run. Inside ``transaction.atomic()`` it commits or vanishes with the caller."""
        return self.using().enqueue(*args, **kwargs)

    def enqueue_many(self, inputs: Iterable[Mapping[str, Any]]) -> list[EnqueueResult]:
        """Queue many runs in one statement per 1,000; every refusal comes before the first write."""
        return self.using().enqueue_many(inputs)

    async def aenqueue(self, *args: P.args, **kwargs: P.kwargs) -> EnqueueResult:
        """``enqueue`` from async code: the same answer and refusals, the statement off the event loop."""
        return await self.using().aenqueue(*args, **kwargs)

    async def aenqueue_many(self, inputs: Iterable[Mapping[str, Any]]) -> list[EnqueueResult]:
        """``enqueue_many`` from async code: the same answers and refusals, off the event loop."""
        return await self.using().aenqueue_many(inputs)

    def using(self, *, delay: Duration | None = None, run_at: datetime | None = None, queue: str | None = None,
              priority: int | None = None, tenant_id: str | None = None, run_id: UUID | str | None = None,
              enqueued_by: object = None, database: str | None = None) -> BoundJob[P, R]:
        """Per-call options, Django's ``Task.using`` shape."""
        return BoundJob(self, EnqueueOptions.build(delay=delay, run_at=run_at, queue=queue, priority=priority,
                                                   tenant_id=tenant_id, run_id=run_id, enqueued_by=enqueued_by,
                                                   database=database))

    # -- introspection ---------------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        """The manifest row: name, queue, retry, idempotent, concurrency and input parameters."""
        concurrency = None
        if self.concurrency is not None:
            concurrency = {"limit": self.concurrency.limit, "keyed": self.concurrency.key is not None,
                           "when_busy": self.concurrency.when_busy}
        return {
            "name": self.name,
            "queue": self.queue,
            "priority": self.priority,
            "retry": self.retry.describe(),
            "idempotent": True,
            "tenant": "none" if self._tenant is None else "per-input",
            "concurrency": concurrency,
            "timeout": self.timeout,
            "sensitive": self.sensitive,
            "input": [{"name": n, "required": p.default is inspect.Parameter.empty,
                       "annotation": annotation_name(p)} for n, p in self.params.items()],
        }


# Any declared job, whatever its input and result: what the runtime and the factories hold.
AnyJobHandle: TypeAlias = JobHandle[..., Any]


@dataclass(frozen=True, slots=True)
class BoundJob(Generic[P, R]):
    """A job with per-call options: what ``handle.using(...)`` answers.

    The input travels one way from here: the handle renders it (``JobHandle.render``), the options
    make the row (``EnqueueOptions.row``), and ``enqueue.submit`` writes it.
    """

    handle: JobHandle[P, R]
    options: EnqueueOptions

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> EnqueueResult:
        """Queue one run; raise a ``JobsError`` before writing anything when the input is refused."""
        if args:
            raise TypeError(f"{self.handle.name}: enqueue() takes the input by keyword only.")
        return submit([self.row(kwargs)], database=self.options.database)[0]

    def enqueue_many(self, inputs: Iterable[Mapping[str, Any]]) -> list[EnqueueResult]:
        """Queue many runs; refuse the whole call (``X_JOB_ENQUEUE_BATCH_TOO_LARGE`` or
        ``X_JOB_INPUT_INVALID``) before the first write."""
        batch = list(inputs)
        if len(batch) > MAX_ENQUEUE_BATCH:
            raise JobsError(X_JOB_ENQUEUE_BATCH_TOO_LARGE, f"enqueue_many got {len(batch)} inputs, over the "
                            f"{MAX_ENQUEUE_BATCH:,} limit.")
        if self.options.run_id is not None and len(batch) > 1:
            raise JobsError(X_JOB_INPUT_INVALID, "using(run_id=...) names one run; enqueue_many takes many.")
        rows = []
        for index, values in enumerate(batch):
            if not isinstance(values, Mapping):
                raise JobsError(X_JOB_INPUT_INVALID, f"enqueue_many input #{index} is not a mapping.")
            try:
                rows.append(self.row(values))
            except JobsError as err:
                raise JobsError(err.code, f"enqueue_many input #{index}: {err.cause}", err.fix) from None
        return submit(rows, database=self.options.database) if rows else []

    async def aenqueue(self, *args: P.args, **kwargs: P.kwargs) -> EnqueueResult:
        """``enqueue`` from async code (see the module): run on asgiref's thread-sensitive thread."""
        return await sync_to_async(self.enqueue, thread_sensitive=True)(*args, **kwargs)

    async def aenqueue_many(self, inputs: Iterable[Mapping[str, Any]]) -> list[EnqueueResult]:
        """``enqueue_many`` from async code (see the module): run on asgiref's thread-sensitive thread."""
        return await sync_to_async(self.enqueue_many, thread_sensitive=True)(inputs)

    def row(self, values: Mapping[str, Any]) -> JobRow:
        """The validated row for one input under these options, not yet written."""
        return self.options.row(self.handle.render(values))
