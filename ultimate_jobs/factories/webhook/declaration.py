"""``webhook()``: deliver one event to one endpoint, as a job.

Usage::

    # billing/jobs.py
    from ultimate_jobs import webhook
    from ultimate_jobs.webhooks import ModelLedger

    deliver = webhook(
        name="billing.webhooks",
        tenant=lambda org_id, **_: org_id,                 # or NO_TENANT
        endpoint=lambda endpoint_id, **_: Endpoint.objects.filter(pk=endpoint_id).first(),
        event=lambda event_id, **_: Event.objects.filter(pk=event_id).first(),
        ledger=ModelLedger())

    for sub in Endpoint.objects.filter(topics__contains=["invoice.paid"]):   # the fan-out is yours
        deliver.enqueue(endpoint_id=sub.pk, event_id=event.pk, org_id=sub.org_id)

Options (default): ``name`` (required: the job's name and the key's prefix), ``tenant`` (required:
as ``@job``'s, over the input), ``endpoint`` (required: ``callable(**input)`` answering an object
or dict with ``id``, ``url``, ``secret`` and optional ``headers`` and ``disabled``, or None; read
on every attempt, never checkpointed, so a rotated secret or a moved URL applies to the next
attempt), ``event`` (required: ``callable(**input)`` answering ``id``, ``topic`` and ``body`` —
str, bytes, or a dict sent as compact JSON — or None), ``ledger`` (required: ``ModelLedger()`` or
your own, see ``ledger``), ``disable_after`` (10 consecutive failures, counted per declaration,
tenant and endpoint), ``timeout`` ("30s": one wall-clock deadline for the attempt — reading the
endpoint and event, resolving, connecting, TLS, sending and the response head all end by it, see
``transport``; the job's own timeout is ``timeout`` + 10 s, a backstop), ``allow_private`` (False),
``queue`` ("default"), ``retry`` (``Retry()``: 3 attempts).

The input must name ``endpoint_id`` and ``event_id`` (more keys pass through to ``endpoint``,
``event`` and ``tenant``); the key is ``<name>:<endpoint_id>:<event_id>``. Each attempt signs at
send time (``X-Ultimate-Webhook-Signature: t=<seconds>,v1=<hex>`` over
``v1:<t>:<event_id>:<topic>:<body>``, with ``X-Ultimate-Webhook-Id`` and ``-Topic``; the
endpoint's ``headers`` are sent too, and ours win a clash). Answers: a 2xx ends the job with
``{"status", "endpoint_id", "event_id", "attempt"}``; 429/503 with ``Retry-After`` is
``X_WEBHOOK_DELIVERY_THROTTLED`` and the next attempt waits that long (clamped by the retry's
``max_delay``); any other 4xx and every 3xx (redirects are never followed) is
``X_WEBHOOK_DELIVERY_REJECTED``; a network error, a DNS failure, no complete answer by the
deadline or a 5xx is ``X_WEBHOOK_DELIVERY_FAILED`` (a malformed ``Retry-After`` is ignored) — all
retried by ``retry``, recorded in the ledger and counted. Terminal: ``X_WEBHOOK_ENDPOINT_UNKNOWN``,
``X_WEBHOOK_EVENT_UNKNOWN``, ``X_WEBHOOK_EVENT_INVALID``, ``X_WEBHOOK_ENDPOINT_INVALID`` (not
https, or an internal address: see ``addresses``), ``X_WEBHOOK_ENDPOINT_DISABLED`` (no request),
``X_WEBHOOK_HTTPX_MISSING``.

Refused at declaration (``X_JOB_DECLARATION_INVALID``, ``X_JOB_TENANT_REQUIRED``): a missing or
non-callable ``endpoint``/``event``, a ledger without ``record``/``consecutive_failures``/
``disable``, ``disable_after`` not a whole number >= 1, a timeout that is not a positive duration.

Logged events: ``jobs.webhook.delivered``, ``jobs.webhook.failed`` (warning),
``jobs.webhook.endpoint-disabled`` (warning).
"""

from __future__ import annotations

import inspect
import json
import logging
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from ultimate_jobs import clock
from ultimate_jobs.conf import get_settings
from ultimate_jobs.context import JobContext
from ultimate_jobs.durations import Duration
from ultimate_jobs.errors import (
    X_JOB_DECLARATION_INVALID,
    X_WEBHOOK_DELIVERY_FAILED,
    X_WEBHOOK_DELIVERY_REJECTED,
    X_WEBHOOK_DELIVERY_THROTTLED,
    X_WEBHOOK_ENDPOINT_DISABLED,
    X_WEBHOOK_ENDPOINT_INVALID,
    X_WEBHOOK_ENDPOINT_UNKNOWN,
    X_WEBHOOK_EVENT_INVALID,
    X_WEBHOOK_EVENT_UNKNOWN,
    JobsError,
    RetryAfter,
    Terminal,
)
from ultimate_jobs.factories.kit import (
    declare,
    missing_tenant,
    named,
    positive_duration,
    require_bool,
    require_callable,
    whole_number,
)
from ultimate_jobs.factories.webhook import addresses, signing, transport
from ultimate_jobs.factories.webhook.ledger import Delivery, WebhookLedger
from ultimate_jobs.handle import AnyJobHandle, JobHandle
from ultimate_jobs.inputs import Tenant
from ultimate_jobs.retry import Retry

log = logging.getLogger("ultimate_jobs")

DEFAULT_DISABLE_AFTER = 10
DEFAULT_TIMEOUT = 30.0
SETTLE_GRACE = 10.0  # seconds the job's timeout runs past the request's, to record and settle


def _takes_key(method: Callable[..., object]) -> bool:
    """Whether a ledger method accepts ``name=`` and ``tenant_id=`` (else: endpoint id alone)."""
    try:
        params = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):
        return False
    names = {p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    return any(p.kind is p.VAR_KEYWORD for p in params) or {"name", "tenant_id"} <= names


class WebhookResult(TypedDict):
    """A delivery's result (a 2xx): the status, the endpoint and event ids, the attempt."""

    status: int
    endpoint_id: str
    event_id: str
    attempt: int


# The handle of a delivery: its input is keyword-only (endpoint_id=, event_id=, and whatever else
# endpoint/event/tenant read), which no ParamSpec literal spells.
WebhookHandle = JobHandle[..., WebhookResult]


@dataclass(frozen=True, slots=True, kw_only=True)
class Webhook:
    """What ``webhook()`` declared beyond the job handle."""

    name: str
    handle: WebhookHandle
    endpoint: Callable[..., object]
    event: Callable[..., object]
    ledger: WebhookLedger
    disable_after: int
    timeout: float
    allow_private: bool
    keyed: bool = True  # the ledger takes name= and tenant_id= (a ledger written before: endpoint id alone)


_declarations: weakref.WeakKeyDictionary[AnyJobHandle, Webhook] = weakref.WeakKeyDictionary()


def get_webhook(handle: AnyJobHandle) -> Webhook | None:
    return _declarations.get(handle)


def _field(value: object, name: str) -> Any:
    return value.get(name) if isinstance(value, Mapping) else getattr(value, name, None)


@dataclass(frozen=True, slots=True)
class _Endpoint:
    id: str
    url: str
    secret: Any
    headers: dict[str, str]
    disabled: bool


def _endpoint(raw: object, owner: str) -> _Endpoint:
    if raw is None:
        raise Terminal(f"{owner}: endpoint() found no endpoint for this input.", code=X_WEBHOOK_ENDPOINT_UNKNOWN)
    endpoint_id, url, secret = _field(raw, "id"), _field(raw, "url"), _field(raw, "secret")
    headers = _field(raw, "headers") or {}
    if endpoint_id is None or not isinstance(url, str) or not url or not isinstance(headers, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
        raise Terminal(f"{owner}: endpoint() must answer id, url (a string), secret and optional headers "
                       "(a dict of strings).", code=X_WEBHOOK_ENDPOINT_INVALID)
    signing.secrets_of(secret, subject="endpoint secret")  # an empty secret never signs a request
    return _Endpoint(str(endpoint_id), url, secret, dict(headers), bool(_field(raw, "disabled")))


def _event(raw: object, owner: str) -> tuple[str, str, bytes, bool]:
    if raw is None:
        raise Terminal(f"{owner}: event() found no event for this input.", code=X_WEBHOOK_EVENT_UNKNOWN)
    event_id, topic, body = _field(raw, "id"), _field(raw, "topic"), _field(raw, "body")
    if event_id is None or str(event_id) == "" or ":" in str(event_id) or not isinstance(topic, str) or not topic \
            or ":" in topic:  # a ':' would make the signed string v1:<t>:<id>:<topic>:<body> ambiguous
        raise Terminal(f"{owner}: event() must answer a non-empty id and topic, neither holding ':'.",
                       code=X_WEBHOOK_EVENT_INVALID)
    if isinstance(body, dict):
        try:
            return str(event_id), topic, json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode(), True
        except (TypeError, ValueError):
            raise Terminal(f"{owner}: the event body dict is not JSON.", code=X_WEBHOOK_EVENT_INVALID) from None
    if isinstance(body, str):
        return str(event_id), topic, body.encode(), False
    if isinstance(body, bytes | bytearray):
        return str(event_id), topic, bytes(body), False
    raise Terminal(f"{owner}: the event body is {type(body).__name__}; send str, bytes or a dict.",
                   code=X_WEBHOOK_EVENT_INVALID)


def outcome(answer: transport.Answer) -> tuple[str | None, str]:
    """(error code or None for a 2xx, a short description) of one request."""
    if answer.status is None:
        return X_WEBHOOK_DELIVERY_FAILED, answer.error or "no response"
    if 200 <= answer.status < 300:
        return None, f"HTTP {answer.status}"
    if answer.status in (429, 503) and answer.retry_after is not None:
        return X_WEBHOOK_DELIVERY_THROTTLED, f"HTTP {answer.status}, Retry-After {answer.retry_after:g}s"
    if answer.status >= 500:
        return X_WEBHOOK_DELIVERY_FAILED, f"HTTP {answer.status}"
    if 300 <= answer.status < 400:
        return X_WEBHOOK_DELIVERY_REJECTED, f"HTTP {answer.status} (a redirect; never followed)"
    return X_WEBHOOK_DELIVERY_REJECTED, f"HTTP {answer.status}"


def deliver(spec: Webhook, ctx: JobContext, values: dict[str, Any]) -> WebhookResult:
    """One attempt: read, check, sign, send, record; raise the outcome's error."""
    started = time.monotonic()
    owner = f"webhook {spec.name!r}"
    endpoint = _endpoint(spec.endpoint(**values), owner)
    event_id, topic, body, is_json = _event(spec.event(**values), owner)
    key: dict[str, Any] = {"name": spec.name, "tenant_id": ctx.tenant_id} if spec.keyed else {}
    if endpoint.disabled or spec.ledger.consecutive_failures(endpoint.id, **key) >= spec.disable_after:
        raise Terminal(f"{owner}: endpoint {endpoint.id} is disabled; no request was sent.",
                       code=X_WEBHOOK_ENDPOINT_DISABLED)

    def record(status: int | None, duration_ms: int, code: str | None) -> None:
        spec.ledger.record(Delivery(name=spec.name, job_id=ctx.job_id, tenant_id=ctx.tenant_id,
                                    endpoint_id=endpoint.id, event_id=event_id, topic=topic, attempt=ctx.attempt,
                                    status_code=status, duration_ms=duration_ms, error_code=code,
                                    delivered_at=clock.now()))

    resolving = time.monotonic()
    try:
        target = addresses.target(endpoint.url, allow_private=spec.allow_private,
                                  allow_http=get_settings().WEBHOOK_ALLOW_HTTP,
                                  timeout=spec.timeout - (resolving - started))
    except Terminal as refused:
        record(None, 0, refused.code)
        raise
    except JobsError as failed:  # the name did not resolve (in time): a failed attempt, counted
        record(None, int((time.monotonic() - resolving) * 1000), failed.code)
        raise JobsError(failed.code, f"{owner}: {failed.cause}") from None
    ours = {"Content-Type": "application/json" if is_json else "application/octet-stream",
            "User-Agent": transport.USER_AGENT, signing.ID_HEADER: event_id, signing.TOPIC_HEADER: topic}
    # The endpoint's headers go under ours: a stored header can never replace the signature.
    taken = {name.lower() for name in ours} | {"host", signing.SIGNATURE_HEADER.lower(), "content-length"}
    headers = {k: v for k, v in endpoint.headers.items() if k.lower() not in taken}
    remaining = spec.timeout - (time.monotonic() - started)
    if remaining <= 0:
        record(None, 0, X_WEBHOOK_DELIVERY_FAILED)
        raise JobsError(X_WEBHOOK_DELIVERY_FAILED, f"{owner}: the attempt's {spec.timeout:g}s were spent before "
                        "the request.")
    t = int(clock.now().timestamp())  # signed now, not at enqueue: a retry carries a fresh timestamp
    headers.update(ours)
    headers[signing.SIGNATURE_HEADER] = signing.signature(signing.secrets_of(endpoint.secret)[0], t=t,
                                                          event_id=event_id, topic=topic, body=body)
    answer = transport.post(target, headers=headers, body=body, timeout=remaining)
    code, what = outcome(answer)
    record(answer.status, answer.duration_ms, code)
    if code is None and answer.status is not None:  # a 2xx: outcome() answers no code only for one
        log.info("jobs.webhook.delivered name=%s endpoint_id=%s event_id=%s attempt=%s status=%s", spec.name,
                 endpoint.id, event_id, ctx.attempt, answer.status)
        return {"status": answer.status, "endpoint_id": endpoint.id, "event_id": event_id, "attempt": ctx.attempt}
    log.warning("jobs.webhook.failed name=%s endpoint_id=%s event_id=%s attempt=%s code=%s %s", spec.name,
                endpoint.id, event_id, ctx.attempt, code, what)
    if spec.ledger.consecutive_failures(endpoint.id, **key) >= spec.disable_after:
        spec.ledger.disable(endpoint.id, **key)
        log.warning("jobs.webhook.endpoint-disabled name=%s endpoint_id=%s after=%s", spec.name, endpoint.id,
                    spec.disable_after)
        raise Terminal(f"{owner}: endpoint {endpoint.id} failed {spec.disable_after} times in a row ({what}) "
                       "and is now disabled.", code=X_WEBHOOK_ENDPOINT_DISABLED)
    cause = f"{owner}: delivery to endpoint {endpoint.id} failed: {what}."
    if code == X_WEBHOOK_DELIVERY_THROTTLED and answer.retry_after is not None:
        raise RetryAfter(answer.retry_after, cause, code=code)
    raise JobsError(code, cause)


def webhook(*, name: str, tenant: Tenant | None = None, endpoint: Callable[..., object],
            event: Callable[..., object], ledger: WebhookLedger, disable_after: int = DEFAULT_DISABLE_AFTER,
            timeout: Duration = DEFAULT_TIMEOUT, allow_private: bool = False, queue: str = "default",
            retry: Retry | int | None = None) -> WebhookHandle:
    """Declare an outbound webhook; see the module docstring for every option and refusal."""
    code = X_JOB_DECLARATION_INVALID
    name, owner = named("webhook", name)
    if tenant is None:
        raise missing_tenant(owner=owner, fix="Pass tenant=lambda org_id, **_: org_id (the endpoint's org), or "
                             "NO_TENANT.")
    for option, value in (("endpoint", endpoint), ("event", event)):
        require_callable(value, owner=owner, option=option, fix=f"Pass {option}=lambda {option}_id, **_: <your row "
                         "or None>.")
    if not all(callable(getattr(ledger, method, None)) for method in ("record", "consecutive_failures", "disable")):
        raise JobsError(code, f"{owner}: ledger={ledger!r} lacks record/consecutive_failures/disable.",
                        "Pass ledger=ultimate_jobs.webhooks.ModelLedger().")
    disable_after = whole_number(disable_after, owner=owner, option="disable_after",
                                 fix=f"Set disable_after={DEFAULT_DISABLE_AFTER} (consecutive failed attempts).")
    seconds = positive_duration(timeout, owner=owner, option="timeout")
    allow_private = require_bool(allow_private, owner=owner, option="allow_private")
    declared: dict[str, Webhook] = {}

    def send(ctx: JobContext, /, *, endpoint_id: Any, event_id: Any, **extra: Any) -> WebhookResult:
        return deliver(declared["self"], ctx, {"endpoint_id": endpoint_id, "event_id": event_id, **extra})

    # The job's own timeout is a backstop past the request's deadline: the delivery ends itself at
    # ``timeout`` (a failure in the ledger, the slot free) before the worker would abandon it.
    handle = declare(send, label=f"webhook[{name}]", name=name, tenant=tenant, queue=queue, retry=retry,
                     timeout=seconds + SETTLE_GRACE,
                     idempotency_key=lambda endpoint_id, event_id, **_: f"{name}:{endpoint_id}:{event_id}")
    spec = Webhook(name=name, handle=handle, endpoint=endpoint, event=event, ledger=ledger,
                   disable_after=disable_after, timeout=seconds, allow_private=allow_private,
                   keyed=_takes_key(ledger.consecutive_failures) and _takes_key(ledger.disable))
    declared["self"] = spec
    _declarations[handle] = spec
    return handle


__all__ = ["Webhook", "get_webhook", "webhook"]
