"""verify_webhook_signature(): the receiving half of the format, with tamper, stale and rotation cases."""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime

import pytest

from ultimate_jobs import JobsError, verify_webhook_signature

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
T = int(NOW.timestamp())
BODY = b'{"invoice":"inv_42","amount":1999}'


def signed(secret: str, *, t: int = T, event_id: str = "evt_1", topic: str = "invoice.paid",
           body: bytes = BODY) -> dict[str, str]:
    mac = hmac.new(secret.encode(), f"v1:{t}:{event_id}:{topic}:".encode() + body, hashlib.sha256).hexdigest()
    return {"X-Ultimate-Webhook-Signature": f"t={t},v1={mac}", "X-Ultimate-Webhook-Id": event_id,
            "X-Ultimate-Webhook-Topic": topic}


def code_of(body: bytes, headers: dict[str, str], secret: object, **kwargs: object) -> str:
    with pytest.raises(JobsError) as err:
        verify_webhook_signature(body, headers, secret, now=NOW, **kwargs)  # type: ignore[arg-type]
    return err.value.code


def test_a_genuine_signature_verifies_with_names_in_any_case() -> None:
    headers = signed("s3cret")
    assert verify_webhook_signature(BODY, headers, "s3cret", now=NOW) is True
    lowered = {k.lower(): v for k, v in headers.items()}
    assert verify_webhook_signature(BODY.decode(), lowered, "s3cret", now=NOW) is True


@pytest.mark.parametrize("tamper", ["body", "event_id", "topic", "timestamp", "mac", "secret"])
def test_tampering_with_any_signed_part_is_refused(tamper: str) -> None:
    headers, body, secret = signed("s3cret"), BODY, "s3cret"
    if tamper == "body":
        body = BODY.replace(b"1999", b"9999")
    elif tamper == "event_id":
        headers["X-Ultimate-Webhook-Id"] = "evt_2"  # a replay under a fresh id
    elif tamper == "topic":
        headers["X-Ultimate-Webhook-Topic"] = "invoice.refunded"
    elif tamper == "timestamp":
        headers["X-Ultimate-Webhook-Signature"] = headers["X-Ultimate-Webhook-Signature"].replace(
            f"t={T}", f"t={T + 1}")
    elif tamper == "mac":
        sig = headers["X-Ultimate-Webhook-Signature"]
        headers["X-Ultimate-Webhook-Signature"] = sig[:-1] + ("0" if sig[-1] != "0" else "1")
    else:
        secret = "another"
    assert code_of(body, headers, secret) == "X_WEBHOOK_SIGNATURE_INVALID"


@pytest.mark.parametrize("headers", [{}, {"X-Ultimate-Webhook-Signature": "garbage"},
                                     {"X-Ultimate-Webhook-Signature": f"t={T}", "X-Ultimate-Webhook-Id": "e",
                                      "X-Ultimate-Webhook-Topic": "t"}])
def test_missing_or_malformed_headers_are_refused(headers: dict[str, str]) -> None:
    assert code_of(BODY, headers, "s3cret") == "X_WEBHOOK_SIGNATURE_INVALID"


def test_a_stale_signature_is_refused_and_the_tolerance_is_honoured() -> None:
    old = signed("s3cret", t=T - 301)
    assert code_of(BODY, old, "s3cret") == "X_WEBHOOK_SIGNATURE_STALE"
    future = signed("s3cret", t=T + 301)
    assert code_of(BODY, future, "s3cret") == "X_WEBHOOK_SIGNATURE_STALE"
    assert verify_webhook_signature(BODY, old, "s3cret", tolerance=600, now=NOW)
    assert verify_webhook_signature(BODY, signed("s3cret", t=T - 300), "s3cret", now=NOW)


def test_rotation_any_listed_secret_verifies() -> None:
    assert verify_webhook_signature(BODY, signed("old-secret"), ["new-secret", "old-secret"], now=NOW)
    assert verify_webhook_signature(BODY, signed("new-secret"), ["new-secret", "old-secret"], now=NOW)
    assert code_of(BODY, signed("retired"), ["new-secret", "old-secret"]) == "X_WEBHOOK_SIGNATURE_INVALID"


@pytest.mark.parametrize("secret", ["", [], ["ok", ""], None])
def test_an_empty_secret_is_a_configuration_error(secret: object) -> None:
    assert code_of(BODY, signed("ok"), secret) == "X_CONFIG_INVALID"
