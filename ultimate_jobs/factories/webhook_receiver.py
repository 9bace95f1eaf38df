"""``webhook_receiver()``: an inbound webhook — a Django view that verifies and enqueues, and the
job that handles the event.

Usage::

    # billing/jobs.py
    from ultimate_jobs import NO_TENANT, JobsError, verify_webhook_signature, webhook_receiver

    def verify(inbound):                              # the exact bytes; nothing parsed yet
        verify_webhook_signature(inbound.body, inbound.headers, secret=[NEW_SECRET, OLD_SECRET])
        return {"event_id": inbound.headers["X-Ultimate-Webhook-Id"],   # signed: inside the MAC
                "payload": json.loads(inbound.body)}

    def handle(*, event_id, payload, ctx):            # the job's body: at least once per event id
        Invoice.objects.filter(pk=payload["invoice"]).update(paid=True)

    billing_events = webhook_receiver(name="billing.events", path="hooks/billing/<str:account>/",
                                      tenant=NO_TENANT, verify=verify, handle=handle)

    # urls.py: path("", include("ultimate_jobs.urls")) serves POST /hooks/billing/<account>/

Options (default): ``name`` (required: the job's name), ``path`` (required: a Django route, no
leading ``/``, ``<converter:name>`` segments become ``inbound.params``), ``tenant`` (required:
``NO_TENANT``, or as ``@job``'s over ``event_id`` and ``payload``), ``verify`` (required:
``callable(inbound) -> {"event_id", "payload"}`` or ``{"answer": response}``; ``inbound.body``
bytes, ``inbound.headers``, ``inbound.params``, ``inbound.query``), ``handle`` (required:
``callable(*, event_id, payload, ctx)``), ``handshake`` (None: ``callable(inbound) -> response``
answering a vendor's ``GET`` challenge on the same path), ``dedupe_window`` ("10m": how long an
accepted event id is remembered after its job settles; 0 remembers it only while the job is live),
``max_bytes`` (1 MiB), ``queue`` ("default"), ``retry`` (``Retry()``).

The view answers ``POST`` (and ``GET`` when ``handshake`` is given); any other method is 405 with
``X_WEBHOOK_METHOD_NOT_ALLOWED`` and ``Allow``. It reads at most ``max_bytes`` (over is 413 with
``X_WEBHOOK_BODY_TOO_LARGE``, decided while reading, never after buffering the rest; under ASGI
wrap the application in ``limit_receiver_bodies`` so the server's body is capped before Django
buffers it), calls ``verify`` — a ``JobsError`` is 401 with its code (422 when the code is
``X_WEBHOOK_BODY_INVALID``); a ``ValueError`` (``json.loads``, a decode error: the signature
passed, the body did not parse) is 422 ``X_WEBHOOK_BODY_INVALID``; anything else is 401
``X_WEBHOOK_SIGNATURE_INVALID``; nothing is queued — checks the event id (1-256 printable ASCII,
else 422 ``X_WEBHOOK_EVENT_ID_INVALID``) and the payload (JSON, else 422
``X_WEBHOOK_EVENT_INVALID``), enqueues the job (key: the event id; the payload is stored
``sensitive``) with a direct insert, and only after that row is committed answers
``200 {"ok": true, "event_id", "deduped"}`` — ``deduped`` true when a live job already holds the
event id (a redelivery). A write that fails is ``503`` with ``Retry-After: 30`` and
``X_WEBHOOK_RECEIVER_UNAVAILABLE``: the sender redelivers. A refusal's body is
``{"ok": false, "code"}``: it never echoes the request or the verifier's message.

A challenge: ``verify`` answering ``{"answer": response}`` (a subscription confirmation sent as a
POST) and ``handshake(inbound)`` (a GET: ``inbound.query`` holds the query string, the body is
empty) answer the app's response, nothing queued. The response is an ``HttpResponse``, a ``str``
(200 text/plain), ``bytes`` or a ``dict`` (200 JSON); raising refuses as ``verify`` does (401).

What the receiver promises: the job is durable before the 200, and ``handle`` runs at least once
per event id. A redelivery while the job is live is deduped (``deduped: true``); so is one within
``dedupe_window`` of the event's first acceptance after the job settled — a vendor's resend, or a
captured request replayed inside the signature's tolerance — answered 200 ``deduped: true`` and
not handled again: keep the window longer than ``verify``'s tolerance (300 s by default), and a
replay that could pass the signature is never a second run. Past the window the event id is
handled again (the sender's signature tolerance is what refuses an old replay). The window is kept
in ``WebhookReceipt`` (one row per accepted event, purged after ``DEAD_RETENTION``), keyed by
(receiver name, tenant, event id). A ``handle`` that must never run twice for one event, whatever
the window, keeps its own seen-set (e.g. a unique row per event id written in the same transaction
as the work).

The view is exempt from Django's CSRF check by design: a sender has no CSRF token, and the
signature ``verify`` checks is the request's authentication. It runs outside
``ATOMIC_REQUESTS`` so the 200 follows the commit. Refused at declaration:
``X_WEBHOOK_RECEIVER_INVALID``; the job's own refusals as ``@job``'s.

Logged events: ``jobs.webhook.received``, ``jobs.webhook.refused`` (warning, with the code),
``jobs.webhook.answered`` (a challenge), ``jobs.webhook.unavailable`` (error).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

from django.db import DatabaseError, IntegrityError, transaction
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.urls import Resolver404, URLPattern, clear_url_caches, resolve
from django.urls import path as route_pattern
from django.views.decorators.csrf import csrf_exempt

from ultimate_jobs import clock
from ultimate_jobs.conf import get_settings
from ultimate_jobs.context import JobContext
from ultimate_jobs.durations import Duration, to_seconds
from ultimate_jobs.enqueue import submit
from ultimate_jobs.errors import (
    X_WEBHOOK_BODY_INVALID,
    X_WEBHOOK_BODY_TOO_LARGE,
    X_WEBHOOK_EVENT_ID_INVALID,
    X_WEBHOOK_EVENT_INVALID,
    X_WEBHOOK_METHOD_NOT_ALLOWED,
    X_WEBHOOK_RECEIVER_INVALID,
    X_WEBHOOK_RECEIVER_UNAVAILABLE,
    X_WEBHOOK_SIGNATURE_INVALID,
    JobsError,
)
from ultimate_jobs.factories.kit import declare, is_whole, missing_tenant, named, require_callables, whole_number
from ultimate_jobs.handle import AnyJobHandle, JobHandle
from ultimate_jobs.inputs import Tenant
from ultimate_jobs.models import WebhookReceipt
from ultimate_jobs.retry import Retry

log = logging.getLogger("ultimate_jobs")

DEFAULT_MAX_BYTES = 1 << 20
DEFAULT_DEDUPE_WINDOW = 600.0  # twice verify_webhook_signature's default tolerance
RETRY_AFTER = 30
CHUNK = 64 * 1024

# The live list ``ultimate_jobs.urls`` includes: a receiver declared after the URLconf loaded is
# served too (Django resolves over this very list object).
urlpatterns: list[URLPattern] = []
_lock = threading.Lock()

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


@dataclass(frozen=True, slots=True)
class Inbound:
    """What ``verify`` is given: the exact body bytes, the request headers, the path's params."""

    body: bytes
    headers: Mapping[str, str]
    params: dict[str, Any] = field(default_factory=dict)
    query: Mapping[str, str] = field(default_factory=dict)


class ReceiverHandler(Protocol[R_co]):
    """``handle``: the job's body, given the verified event (``payload`` is whatever JSON ``verify``
    answered) and the run's context."""

    def __call__(self, *, event_id: str, payload: Any, ctx: JobContext) -> R_co: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Receiver:
    name: str
    path: str
    handle: AnyJobHandle
    verify: Callable[[Inbound], object]
    max_bytes: int
    handshake: Callable[[Inbound], object] | None = None
    dedupe_window: float = 0.0


def _refuse(status: int, code: str, receiver: Receiver, why: str) -> JsonResponse:
    log.warning("jobs.webhook.refused name=%s status=%s code=%s %s", receiver.name, status, code, why)
    return JsonResponse({"ok": False, "code": code}, status=status)


def _read(request: HttpRequest, limit: int) -> bytes | None:
    """The body, or None past ``limit`` bytes: the declared length is checked first, then the
    stream is read a chunk at a time and abandoned as soon as it passes the cap."""
    declared = request.META.get("CONTENT_LENGTH") or ""
    if declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = request.read(CHUNK)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)


def _event_id(value: object) -> str | None:
    if is_whole(value):
        value = str(value)
    if isinstance(value, str) and 1 <= len(value) <= 256 and all(33 <= ord(c) < 127 for c in value):
        return value
    return None


def _not_allowed(receiver: Receiver, method: str | None) -> JsonResponse:
    allowed = "GET, POST" if receiver.handshake is not None else "POST"
    response = _refuse(405, X_WEBHOOK_METHOD_NOT_ALLOWED, receiver, f"method {method!r}")
    response["Allow"] = allowed
    return response


def _refusal(receiver: Receiver, err: Exception, what: str) -> JsonResponse:
    """A raise from ``verify`` or ``handshake``: 401 for a refused signature, 422 for a body that did
    not parse (the signature passed); never the exception's message, which may quote the body."""
    if isinstance(err, JobsError):
        return _refuse(422 if err.code == X_WEBHOOK_BODY_INVALID else 401, err.code, receiver, f"{what} refused")
    if isinstance(err, ValueError):  # json.JSONDecodeError and UnicodeDecodeError among them
        return _refuse(422, X_WEBHOOK_BODY_INVALID, receiver, f"{what} could not parse the body "
                       f"({type(err).__name__})")
    return _refuse(401, X_WEBHOOK_SIGNATURE_INVALID, receiver, f"{what} raised {type(err).__name__}")


def _answer(receiver: Receiver, value: object, what: str) -> HttpResponseBase:
    """The app's own answer to a challenge: a response, text, bytes or a JSON dict."""
    if isinstance(value, HttpResponseBase):
        response = value
    elif isinstance(value, str):
        response = HttpResponse(value, content_type="text/plain; charset=utf-8")
    elif isinstance(value, bytes):
        response = HttpResponse(value, content_type="application/octet-stream")
    elif isinstance(value, dict):
        response = JsonResponse(value)
    else:
        log.error("jobs.webhook.refused name=%s status=500 code=%s %s answered %s", receiver.name,
                  X_WEBHOOK_RECEIVER_INVALID, what, type(value).__name__)
        return JsonResponse({"ok": False, "code": X_WEBHOOK_RECEIVER_INVALID}, status=500)
    log.info("jobs.webhook.answered name=%s by=%s status=%s", receiver.name, what, response.status_code)
    return response


def _handshake(receiver: Receiver, request: HttpRequest, params: dict[str, Any]) -> HttpResponseBase:
    assert receiver.handshake is not None
    try:
        value = receiver.handshake(Inbound(body=b"", headers=request.headers, params=params,
                                           query=request.GET.dict()))
    except Exception as exc:  # refused or failed: never echoed
        return _refusal(receiver, exc, "handshake")
    return _answer(receiver, value, "handshake")


def receive(receiver: Receiver, request: HttpRequest, params: dict[str, Any]) -> HttpResponseBase:
    if request.method in ("GET", "HEAD") and receiver.handshake is not None:
        return _handshake(receiver, request, params)
    if request.method != "POST":
        return _not_allowed(receiver, request.method)
    body = _read(request, receiver.max_bytes)
    if body is None:
        return _refuse(413, X_WEBHOOK_BODY_TOO_LARGE, receiver, f"over max_bytes={receiver.max_bytes}")
    try:
        answer = receiver.verify(Inbound(body=body, headers=request.headers, params=params,
                                         query=request.GET.dict()))
    except Exception as exc:  # a refusal, or the verifier's own parse error (its message may quote the body)
        return _refusal(receiver, exc, "verify")
    if isinstance(answer, Mapping) and "answer" in answer and "event_id" not in answer:
        return _answer(receiver, answer["answer"], "verify")
    event_id = _event_id(_get(answer, "event_id"))
    if event_id is None:
        return _refuse(422, X_WEBHOOK_EVENT_ID_INVALID, receiver, "verify answered no valid event_id")
    payload = _get(answer, "payload")
    try:
        row = receiver.handle.using(database=get_settings().DATABASE).row({"event_id": event_id, "payload": payload})
    except JobsError as err:
        return _refuse(422, X_WEBHOOK_EVENT_INVALID, receiver, f"payload refused ({err.code})")
    alias = get_settings().DATABASE
    key = {"name": receiver.name, "tenant_id": row.tenant_id or "", "event_id": event_id}
    now = clock.now()
    try:
        if receiver.dedupe_window and WebhookReceipt.objects.using(alias).filter(
                **key, received_at__gte=now - timedelta(seconds=receiver.dedupe_window)).exists():
            log.info("jobs.webhook.received name=%s event_id=%s deduped=True within=%gs", receiver.name, event_id,
                     receiver.dedupe_window)
            return JsonResponse({"ok": True, "event_id": event_id, "deduped": True})
        # Direct, on the view's own autocommit: the row is committed when this returns.
        result = submit([row], database=alias, direct=True)[0]
    except DatabaseError as exc:
        log.error("jobs.webhook.unavailable name=%s event_id=%s %s", receiver.name, event_id, type(exc).__name__)
        response = JsonResponse({"ok": False, "code": X_WEBHOOK_RECEIVER_UNAVAILABLE}, status=503)
        response["Retry-After"] = str(RETRY_AFTER)
        return response
    if receiver.dedupe_window and not result.deduped:
        _remember(alias, key, now)
    log.info("jobs.webhook.received name=%s event_id=%s job_id=%s deduped=%s", receiver.name, event_id, result.id,
             result.deduped)
    return JsonResponse({"ok": True, "event_id": event_id, "deduped": bool(result.deduped)})


def _remember(alias: str, key: dict[str, str], now: datetime) -> None:
    """Stamp the event's receipt (after the job's row is durable: a receipt never hides a lost
    event). A failed write only shortens the window for this one event: logged, not refused."""
    rows = WebhookReceipt.objects.using(alias)
    try:
        if rows.filter(**key).update(received_at=now):
            return
        try:
            with transaction.atomic(using=alias):
                rows.create(**key, received_at=now)
        except IntegrityError:  # a concurrent delivery of the same event created it
            rows.filter(**key).update(received_at=now)
    except DatabaseError as exc:
        log.warning("jobs.webhook.unavailable name=%s event_id=%s receipt not written (%s)", key["name"],
                    key["event_id"], type(exc).__name__)


def _get(answer: object, key: str) -> Any:
    return answer.get(key) if isinstance(answer, Mapping) else None


def webhook_receiver(*, name: str, path: str, tenant: Tenant | None = None,  # noqa: A002
                     verify: Callable[[Inbound], Mapping[str, object]], handle: ReceiverHandler[R],
                     handshake: Callable[[Inbound], object] | None = None,
                     dedupe_window: Duration | None = DEFAULT_DEDUPE_WINDOW,
                     max_bytes: int = DEFAULT_MAX_BYTES, queue: str = "default",
                     retry: Retry | int | None = None) -> JobHandle[..., R]:
    """Declare an inbound webhook; see the module docstring for every option and refusal.

    The handle's input, ``event_id=`` and ``payload=``, is keyword-only, which no ParamSpec literal
    spells: it answers ``JobHandle[..., R]``, ``R`` being what ``handle`` answers."""
    code = X_WEBHOOK_RECEIVER_INVALID
    name, owner = named("webhook_receiver", name)
    route = path
    if not isinstance(route, str) or not route or route.startswith("/"):
        raise JobsError(code, f"{owner}: path={route!r} must be a Django route without a leading '/'.",
                        'Pass path="hooks/billing/<str:account>/".')
    if tenant is None:
        raise missing_tenant(owner=owner, code=code, fix="Pass tenant=NO_TENANT or tenant=lambda payload, **_: ...")
    require_callables(owner=owner, code=code, verify=verify, handle=handle)
    if handshake is not None:
        require_callables(owner=owner, code=code, handshake=handshake)
    window = 0.0 if dedupe_window is None else to_seconds(
        dedupe_window, subject=f"{owner}: dedupe_window", positive=False, code=code)
    max_bytes = whole_number(max_bytes, owner=owner, option="max_bytes", unit="bytes", code=code,
                             fix=f"Set max_bytes={DEFAULT_MAX_BYTES} (1 MiB), or the largest body a sender posts.")

    declared: dict[str, Receiver] = {}

    @csrf_exempt
    @transaction.non_atomic_requests
    def view(request: HttpRequest, **params: Any) -> HttpResponseBase:
        return receive(declared["self"], request, params)

    view.webhook_max_bytes = max_bytes  # type: ignore[attr-defined]  # read by limit_receiver_bodies

    try:  # compiled before the job is declared: a bad route declares nothing
        pattern = route_pattern(route, view, name=f"webhook.{name}")
    except Exception as exc:  # Django's route compiler raises ImproperlyConfigured or ValueError
        raise JobsError(code, f"{owner}: path={route!r} is not a Django route ({type(exc).__name__}).") from None

    def run(ctx: JobContext, /, *, event_id: str, payload: Any = None) -> R:
        return handle(event_id=event_id, payload=payload, ctx=ctx)

    job_handle = declare(run, label=f"webhook_receiver[{name}]", name=name, idempotency_key="{event_id}",
                         tenant=tenant, queue=queue, retry=retry, sensitive=True)
    declared["self"] = Receiver(name=name, path=route, handle=job_handle, verify=verify, max_bytes=max_bytes,
                                handshake=handshake, dedupe_window=window)
    with _lock:
        urlpatterns[:] = [p for p in urlpatterns if p.name != f"webhook.{name}"] + [pattern]
    clear_url_caches()
    return job_handle


Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def _receiver_limit(scope: Scope) -> int | None:
    """``max_bytes`` of the receiver this request goes to, or None for any other route."""
    path = str(scope.get("path") or "/")
    root = str(scope.get("root_path") or "")
    if root and path.startswith(root):
        path = path[len(root):] or "/"
    try:
        match = resolve(path)
    except Resolver404:
        return None
    limit = getattr(match.func, "webhook_max_bytes", None)
    return limit if isinstance(limit, int) else None


async def _too_large(send: Send) -> None:
    body = b'{"ok": false, "code": "' + X_WEBHOOK_BODY_TOO_LARGE.encode() + b'"}'
    await send({"type": "http.response.start", "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


def limit_receiver_bodies(application: ASGIApp) -> ASGIApp:
    """Wrap an ASGI application so a ``webhook_receiver``'s body is capped while it streams.

    Django's ASGI handler reads the whole body (to a temporary file past
    ``FILE_UPLOAD_MAX_MEMORY_SIZE``) before any view runs, so the view's own ``max_bytes`` check
    comes after the bytes were taken. This wrapper reads a receiver's POST body first, a message
    at a time, and answers 413 ``X_WEBHOOK_BODY_TOO_LARGE`` the moment it passes ``max_bytes``
    (or at once when ``Content-Length`` says so); a body within the cap is handed to Django whole.
    Other routes pass through untouched::

        # asgi.py
        from django.core.asgi import get_asgi_application
        from ultimate_jobs.webhooks import limit_receiver_bodies

        application = limit_receiver_bodies(get_asgi_application())
    """

    async def capped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http" or scope.get("method") != "POST":
            await application(scope, receive, send)
            return
        limit = _receiver_limit(scope)
        if limit is None:
            await application(scope, receive, send)
            return
        declared = next((v for k, v in scope.get("headers") or () if bytes(k).lower() == b"content-length"), b"")
        if declared.isdigit() and int(declared) > limit:
            await _too_large(send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message.get("type") == "http.disconnect":
                return  # the sender gave up: nothing to answer
            chunk = bytes(message.get("body") or b"")
            size += len(chunk)
            if size > limit:
                await _too_large(send)
                return
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await application(scope, replay, send)

    return capped
