"""Internal: one HTTP POST of a webhook, through httpx, to the address ``addresses`` checked.

httpx is the ``webhooks`` extra and is imported here, on the first delivery, never at import:
without it a delivery fails ``X_WEBHOOK_HTTPX_MISSING`` (terminal). The request goes to the pinned
address with the endpoint's name as ``Host`` and TLS server name (``sni_hostname``: the
certificate is verified against the name); redirects are never followed; the environment's
proxies are ignored (a proxy would resolve the name again); the response body is never read.

Clients are kept per process, one per (scheme, address, port, TLS server name) — at most
``MAX_CLIENTS``, least recently used dropped — so connections are reused across deliveries to one
endpoint and a pooled TLS connection is never reused under another name. They share one SSL
context: loading the CA bundle costs tens of milliseconds, a fresh one per delivery capped a worker
at a few deliveries a second (bench/webhooks.py).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
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


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """What came back: a status (None when no response arrived), Retry-After seconds, the time spent."""

    status: int | None
    retry_after: float | None
    duration_ms: int
    error: str | None = None


def _httpx() -> Any:
    try:
        import httpx  # optional: the webhooks extra, needed only by a delivery
    except ImportError:
        raise Terminal("webhook() sends with httpx, which is not installed.", code=X_WEBHOOK_HTTPX_MISSING) from None
    return httpx


def retry_after_seconds(value: str | None) -> float | None:
    """``Retry-After`` as seconds from now: delta-seconds or an HTTP date; None when absent or bad."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - clock.now()).total_seconds())


def _client(httpx: Any, target: Target) -> Any:
    key = (target.scheme, target.connect_url.split("/", 3)[2], target.server_name)
    with _lock:
        client = _clients.get(key)
        if client is not None:
            _clients.move_to_end(key)
            return client
        if not _ssl:
            _ssl.append(httpx.create_ssl_context())
        client = httpx.Client(follow_redirects=False, trust_env=False, verify=_ssl[0])
        _clients[key] = client
        if len(_clients) > MAX_CLIENTS:
            _clients.popitem(last=False)[1].close()
        return client


def post(target: Target, *, headers: dict[str, str], body: bytes, timeout: float) -> Answer:
    """POST ``body`` to ``target`` within ``timeout`` seconds (each phase: connect, send, wait)."""
    httpx = _httpx()
    started = time.monotonic()
    sent = {**headers, "Host": target.host_header}
    extensions = {"sni_hostname": target.server_name} if target.scheme == "https" else {}
    try:
        client = _client(httpx, target)
        request = client.build_request("POST", target.connect_url, headers=sent, content=body,
                                       extensions=extensions, timeout=httpx.Timeout(timeout))
        response = client.send(request, stream=True)
        try:
            status = response.status_code
            retry_after = retry_after_seconds(response.headers.get("retry-after"))
        finally:
            response.close()
    except httpx.HTTPError as exc:
        return Answer(status=None, retry_after=None, duration_ms=_ms(started),
                      error=f"{type(exc).__name__}: {exc}"[:500])
    return Answer(status=status, retry_after=retry_after, duration_ms=_ms(started))


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC)
