"""Internal: the webhook signature, one format for the sending and the receiving half.

``X-Ultimate-Webhook-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>`` over the bytes
``v1:<t>:<event id>:<topic>:<body>``. The timestamp and the event id are inside the MAC, so a
captured request can neither be replayed later (the tolerance) nor under another id (the
receiver's dedupe key). Neither the event id nor the topic may hold ``:`` (refused when sending,
``X_WEBHOOK_EVENT_INVALID``, and when verifying, ``X_WEBHOOK_SIGNATURE_INVALID``): with a ``:`` in
the id, ``id="a:b", topic="c", body="d"`` and ``id="a", topic="b", body="c:d"`` sign the same
bytes, and one captured signature would pass under a fresh event id. Signatures made before this
rule, over ids without ``:``, verify unchanged. The public name is
``ultimate_jobs.verify_webhook_signature``.
"""

from __future__ import annotations

import hashlib
import hmac
import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ultimate_jobs import clock
from ultimate_jobs.errors import (
    X_CONFIG_INVALID,
    X_WEBHOOK_SIGNATURE_INVALID,
    X_WEBHOOK_SIGNATURE_STALE,
    JobsError,
)

SIGNATURE_HEADER = "X-Ultimate-Webhook-Signature"
ID_HEADER = "X-Ultimate-Webhook-Id"
TOPIC_HEADER = "X-Ultimate-Webhook-Topic"
DEFAULT_TOLERANCE = 300

Secret = str | bytes
_HEX = frozenset("0123456789abcdefABCDEF")


def secrets_of(secret: Secret | Sequence[Secret], *, subject: str = "secret") -> list[bytes]:
    """The secret, or a rotation list of them, as bytes; an empty one is ``X_CONFIG_INVALID``."""
    many = [secret] if isinstance(secret, str | bytes) else list(secret) if isinstance(secret, Sequence) else None
    if not many:
        raise JobsError(X_CONFIG_INVALID, f"the webhook {subject} must be a non-empty string or a non-empty list of "
                        "them (rotation).", "Read the secret from your settings; an unset one reads as empty.")
    keys = []
    for one in many:
        if not isinstance(one, str | bytes) or not one:
            raise JobsError(X_CONFIG_INVALID, f"a webhook {subject} (or one entry of its rotation list) is empty or "
                            "not a string.", "Remove the empty entry; every secret in a rotation list must be set.")
        keys.append(one.encode() if isinstance(one, str) else one)
    return keys


def signed_bytes(t: int, event_id: str, topic: str, body: bytes) -> bytes:
    return f"v1:{t}:{event_id}:{topic}:".encode() + body


def signature(secret: Secret, *, t: int, event_id: str, topic: str, body: bytes) -> str:
    """The header value for one request, signed with ``secret`` at ``t``."""
    key = secrets_of(secret)[0]
    mac = hmac.new(key, signed_bytes(t, event_id, topic, body), hashlib.sha256).hexdigest()
    return f"t={t},v1={mac}"


def _header(headers: Mapping[str, Any], name: str) -> str | None:
    value = headers.get(name)
    if value is None:  # a plain dict: compare names case-insensitively, as HTTP does
        lowered = name.lower()
        value = next((v for k, v in headers.items() if isinstance(k, str) and k.lower() == lowered), None)
    return value if isinstance(value, str) else None


def _parse(value: str | None) -> tuple[int, list[str]] | None:
    if not value:
        return None
    t: int | None = None
    macs = []
    for part in value.split(","):
        key, _, val = part.strip().partition("=")
        if key == "t" and val.isascii() and val.isdigit() and len(val) <= 12:  # '²'.isdigit() is True too
            t = int(val)
        elif key == "v1" and len(val) == 64 and all(c in _HEX for c in val):
            macs.append(val.lower())
    return (t, macs) if t is not None and macs else None


def verify_webhook_signature(body: bytes | str, headers: Mapping[str, Any], secret: Secret | Sequence[Secret],
                             tolerance: float = DEFAULT_TOLERANCE, now: datetime | float | None = None) -> bool:
    """Answer True when ``headers`` carry a valid signature of ``body`` by ``secret``.

    ``headers`` is a mapping holding the ``X-Ultimate-Webhook-*`` headers (Django's
    ``request.headers``, or a dict: names compare case-insensitively); ``body`` the exact request
    bytes; ``secret`` one secret or a list (rotation: any may match); ``tolerance`` seconds the
    timestamp may differ from ``now`` (default the clock). Raise ``X_WEBHOOK_SIGNATURE_INVALID``
    for a missing, malformed or wrong signature, ``X_WEBHOOK_SIGNATURE_STALE`` for a genuine one
    outside the tolerance, ``X_CONFIG_INVALID`` for an empty secret.
    """
    keys = secrets_of(secret)
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float) or not math.isfinite(tolerance) or \
            tolerance < 0:
        raise JobsError(X_CONFIG_INVALID, f"tolerance={tolerance!r} must be a finite number of seconds >= 0.")
    raw = body.encode() if isinstance(body, str) else bytes(body)
    parsed = _parse(_header(headers, SIGNATURE_HEADER))
    event_id, topic = _header(headers, ID_HEADER), _header(headers, TOPIC_HEADER)
    if parsed is None or event_id is None or topic is None:
        raise JobsError(X_WEBHOOK_SIGNATURE_INVALID, f"the request has no well-formed {SIGNATURE_HEADER}, "
                        f"{ID_HEADER} and {TOPIC_HEADER} headers.")
    if ":" in event_id or ":" in topic:
        raise JobsError(X_WEBHOOK_SIGNATURE_INVALID, f"the {ID_HEADER} or {TOPIC_HEADER} header holds ':', which "
                        "would make the signed string ambiguous; such a signature is never accepted.")
    t, given = parsed
    message = signed_bytes(t, event_id, topic, raw)
    expected = [hmac.new(key, message, hashlib.sha256).hexdigest() for key in keys]
    if not any(hmac.compare_digest(e, g) for e in expected for g in given):
        raise JobsError(X_WEBHOOK_SIGNATURE_INVALID, "the signature does not match the body with any of the "
                        "secrets given.")
    at = clock.now().timestamp() if now is None else now.timestamp() if isinstance(now, datetime) else float(now)
    if abs(at - t) > tolerance:
        raise JobsError(X_WEBHOOK_SIGNATURE_STALE, f"the signature was made {abs(at - t):.0f}s from now, outside the "
                        f"{tolerance:g}s tolerance.")
    return True
