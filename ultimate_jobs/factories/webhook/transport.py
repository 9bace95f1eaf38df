"""Internal: one HTTP POST of a webhook to the address ``addresses`` checked, inside one deadline.

httpx (with httpcore under it) is the ``webhooks`` extra and is imported here, on the first
delivery, never at import: without it a delivery fails ``X_WEBHOOK_HTTPX_MISSING`` (terminal). The
request goes to the pinned address with the endpoint's name as ``Host`` and TLS server name
(``sni_hostname``: the certificate is verified against the name); redirects are never followed (a
3xx is an answer); no proxy is used (a proxy would resolve the name again); the response body is
never read.

**One wall-clock deadline.** A timeout in httpx/httpcore bounds each read, write or connect: an
endpoint that sends one byte of its answer a second is never cut. Here every connection is made by
``DeadlineBackend``, whose streams give each socket operation ``min(its own timeout, what is left
of the request's deadline)`` and refuse to start one once the deadline has passed, so the whole
exchange — connect, TLS handshake, send, the response head — ends by ``timeout`` (CPython bounds a
single TLS handshake or read by the socket timeout as one deadline, and writes are sent here a
``send`` at a time, each with what is left). The deadline lives in a thread-local the calling thread
sets for its request, so pooled connections shared by the worker's threads read their own caller's.
Chosen over a watchdog thread that shuts the socket: no timer per delivery, no race between a
watchdog and a connection handed back to the pool, and the cut is a plain timeout the pool already
knows how to discard.

Connections are pooled per process, one pool per (scheme, address, port, TLS server name) — at
most ``MAX_CLIENTS``, least recently used dropped — so connections are reused across deliveries to
one endpoint and a pooled TLS connection is never reused under another name. They share one SSL
context: loading the CA bundle costs tens of milliseconds, a fresh one per delivery capped a worker
at a few deliveries a second (bench/webhooks.py).
"""

from __future__ import annotations

import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from ultimate_jobs import clock
from ultimate_jobs.errors import X_WEBHOOK_HTTPX_MISSING, Terminal
from ultimate_jobs.factories.webhook.addresses import Target

USER_AGENT = "ultimate-jobs-webhook/1"
MAX_CLIENTS = 32

_clients: OrderedDict[tuple[str, str, str], Any] = OrderedDict()
_ssl: list[Any] = []
_lock = threading.Lock()
_request = threading.local()  # .deadline: time.monotonic() by which this thread's exchange ends


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """What came back: a status (None when no response arrived), Retry-After seconds, the time spent."""

    status: int | None
    retry_after: float | None
    duration_ms: int
    error: str | None = None


def _modules() -> tuple[Any, Any]:
    try:
        import httpcore  # optional: the webhooks extra, needed only by a delivery
        import httpx
    except ImportError:
        raise Terminal("webhook() sends with httpx, which is not installed.", code=X_WEBHOOK_HTTPX_MISSING) from None
    return httpx, httpcore


def retry_after_seconds(value: str | None) -> float | None:
    """``Retry-After`` as seconds from now: delta-seconds or an HTTP date; None when absent or
    malformed (``²``, ``١``, ``-1``, garbage: the retry policy's delay applies instead)."""
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():  # str.isdigit() alone also passes '²' and '١'
        return float(min(int(value), 10**9))
    if not value.isascii():
        return None
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - clock.now()).total_seconds())


def remaining(given: float | None) -> float | None:
    """``given`` (a per-operation timeout) shrunk to what is left of this thread's deadline."""
    deadline: float | None = getattr(_request, "deadline", None)
    if deadline is None:
        return given
    left = deadline - time.monotonic()
    return left if given is None else min(given, left)


def _backend(httpcore: Any) -> Any:
    """A network backend whose streams stop at the calling thread's deadline (built once)."""

    class DeadlineStream(httpcore.NetworkStream):  # type: ignore[misc]
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            left = remaining(timeout)
            if left is not None and left <= 0:
                raise httpcore.ReadTimeout("the delivery's deadline passed while reading the answer")
            return bytes(self._inner.read(max_bytes, left))

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            sock = self._inner.get_extra_info("socket")
            if sock is None:  # not a socket stream: no per-send control, one bounded call
                left = remaining(timeout)
                if left is not None and left <= 0:
                    raise httpcore.WriteTimeout("the delivery's deadline passed while sending")
                self._inner.write(buffer, left)
                return
            view = memoryview(buffer)
            while view:
                left = remaining(timeout)
                if left is not None and left <= 0:
                    raise httpcore.WriteTimeout("the delivery's deadline passed while sending")
                try:
                    sock.settimeout(left)
                    sent = sock.send(view)
                except TimeoutError as exc:
                    raise httpcore.WriteTimeout(str(exc) or "timed out") from exc
                except OSError as exc:
                    raise httpcore.WriteError(str(exc)) from exc
                view = view[sent:]

        def close(self) -> None:
            self._inner.close()

        def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                      timeout: float | None = None) -> Any:
            left = remaining(timeout)
            if left is not None and left <= 0:
                raise httpcore.ConnectTimeout("the delivery's deadline passed before the TLS handshake")
            return DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, left))

        def get_extra_info(self, info: str) -> Any:
            return self._inner.get_extra_info(info)

    class DeadlineBackend(httpcore.NetworkBackend):  # type: ignore[misc]
        def __init__(self) -> None:
            self._inner = httpcore.SyncBackend()

        def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                        socket_options: Iterable[Any] | None = None) -> Any:
            left = remaining(timeout)
            if left is not None and left <= 0:
                raise httpcore.ConnectTimeout("the delivery's deadline passed before connecting")
            return DeadlineStream(self._inner.connect_tcp(host, port, left, local_address, socket_options))

        def connect_unix_socket(self, path: str, timeout: float | None = None,
                                socket_options: Iterable[Any] | None = None) -> Any:
            raise httpcore.ConnectError("webhooks are sent over TCP only")

        def sleep(self, seconds: float) -> None:
            self._inner.sleep(seconds)

    return DeadlineBackend()


def _pool(httpx: Any, httpcore: Any, target: Target) -> Any:
    key = (target.scheme, target.connect_url.split("/", 3)[2], target.server_name)
    with _lock:
        pool = _clients.get(key)
        if pool is not None:
            _clients.move_to_end(key)
            return pool
        if not _ssl:
            _ssl.extend([httpx.create_ssl_context(), _backend(httpcore)])
        pool = httpcore.ConnectionPool(ssl_context=_ssl[0], network_backend=_ssl[1], max_connections=None)
        _clients[key] = pool
        if len(_clients) > MAX_CLIENTS:
            _clients.popitem(last=False)[1].close()
        return pool


def post(target: Target, *, headers: dict[str, str], body: bytes, timeout: float) -> Answer:
    """POST ``body`` to ``target``; the whole exchange ends within ``timeout`` seconds of the call."""
    httpx, httpcore = _modules()
    started = time.monotonic()
    try:
        sent = [(b"Host", target.host_header.encode("idna"))]
        sent += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
    except UnicodeError:
        return Answer(status=None, retry_after=None, duration_ms=0,
                      error="the host or a header of the endpoint is not latin-1 text; nothing was sent")
    extensions: dict[str, Any] = {"timeout": dict.fromkeys(("connect", "read", "write", "pool"), timeout)}
    if target.scheme == "https":
        extensions["sni_hostname"] = target.server_name
    failures = (httpcore.TimeoutException, httpcore.NetworkError, httpcore.ProtocolError,
                httpcore.UnsupportedProtocol, httpcore.ConnectionNotAvailable, httpcore.PoolTimeout)
    _request.deadline = started + timeout
    try:
        pool = _pool(httpx, httpcore, target)
        with pool.stream("POST", target.connect_url, headers=sent, content=body, extensions=extensions) as response:
            status = int(response.status)
            retry_after = retry_after_seconds(_header(response.headers, b"retry-after"))
    except failures as exc:
        late = time.monotonic() - started >= timeout
        why = (f"no complete answer within the delivery's {timeout:g}s timeout (one deadline for the whole "
               "exchange)") if late else f"{type(exc).__name__}: {exc}"
        return Answer(status=None, retry_after=None, duration_ms=_ms(started), error=why[:500])
    finally:
        _request.deadline = None
    return Answer(status=status, retry_after=retry_after, duration_ms=_ms(started))


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> str | None:
    for key, value in headers:
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC)
