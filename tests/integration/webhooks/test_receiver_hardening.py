"""webhook_receiver() and verify_webhook_signature() against what a hostile or careless sender
sends (issues 25 and 29): a body verify cannot parse is 422, not a bad signature; GET is coded, or
answered by the app's handshake; a non-ASCII digit or a ':' in the id never gets past the
signature; under ASGI a receiver's body is capped while it streams."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.core.asgi import get_asgi_application
from django.http import HttpResponse
from django.test import Client

from ultimate_jobs import NO_TENANT, JobsError, Terminal, clock, verify_webhook_signature, webhook_receiver
from ultimate_jobs.models import Job
from ultimate_jobs.registry import unregister as _unregister
from ultimate_jobs.webhooks import limit_receiver_bodies

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("shared_thread_connections_closed")]
SECRET = "whsec-hardening"
URL = "/jobs/hooks/hardening/acme/"


def mac(t: int, event_id: str, topic: str, body: bytes, secret: str = SECRET) -> str:
    return hmac.new(secret.encode(), f"v1:{t}:{event_id}:{topic}:".encode() + body, hashlib.sha256).hexdigest()


def headers(body: bytes, event_id: str, topic: str = "invoice.paid") -> dict[str, str]:
    t = int(clock.now().timestamp())
    return {"X-Ultimate-Webhook-Signature": f"t={t},v1={mac(t, event_id, topic, body)}",
            "X-Ultimate-Webhook-Id": event_id, "X-Ultimate-Webhook-Topic": topic}


def meta(plain: dict[str, str]) -> dict[str, str]:
    return {"HTTP_" + k.upper().replace("-", "_"): v for k, v in plain.items()}


def docs_verify(inbound: Any) -> dict[str, Any]:  # as docs/reference/webhooks.md writes it
    verify_webhook_signature(inbound.body, inbound.headers, SECRET)
    return {"event_id": inbound.headers["X-Ultimate-Webhook-Id"], "payload": json.loads(inbound.body)}


@pytest.fixture
def declare() -> Iterator[Callable[..., Any]]:
    names: list[str] = []

    def make(name: str = "tests.webhooks.hardening", **options: Any) -> Any:
        options.setdefault("verify", docs_verify)
        handle = webhook_receiver(name=name, path="hooks/hardening/<str:account>/", tenant=NO_TENANT,
                                  handle=lambda **_: None, **options)
        names.append(name)
        return handle

    yield make
    for name in names:
        _unregister(name)


def test_a_signed_body_verify_cannot_parse_is_422_with_its_own_code(declare) -> None:
    receiver = declare()
    body = b"amount=1999&card=4242-planted"  # form-encoded, genuinely signed, not JSON
    response = Client().post(URL, data=body, content_type="application/x-www-form-urlencoded",
                             **meta(headers(body, "evt_form_1")))
    assert response.status_code == 422
    assert response.json() == {"ok": False, "code": "X_WEBHOOK_BODY_INVALID"}
    assert b"4242-planted" not in response.content
    forged = Client().post(URL, data=b"{}", content_type="application/json",
                           **meta({**headers(b"{}", "evt_form_2"), "X-Ultimate-Webhook-Id": "evt_other"}))
    assert (forged.status_code, forged.json()["code"]) == (401, "X_WEBHOOK_SIGNATURE_INVALID")  # 401: signatures only
    assert not Job.objects.filter(name=receiver.name).exists()


def test_a_get_is_answered_by_the_handshake_and_queues_nothing(declare) -> None:
    seen: list[Any] = []

    def handshake(inbound: Any) -> Any:
        seen.append((inbound.params, dict(inbound.query), inbound.body))
        if inbound.query.get("hub.verify_token") != "planted-token-5":
            raise JobsError("X_WEBHOOK_SIGNATURE_INVALID", "wrong verify token")
        return inbound.query["hub.challenge"]

    receiver = declare(handshake=handshake)
    ok = Client().get(URL, {"hub.verify_token": "planted-token-5", "hub.challenge": "challenge-8817"})
    assert (ok.status_code, ok.content, ok["Content-Type"]) == (200, b"challenge-8817", "text/plain; charset=utf-8")
    assert seen[0] == ({"account": "acme"}, {"hub.verify_token": "planted-token-5", "hub.challenge": "challenge-8817"},
                       b"")
    refused = Client().get(URL, {"hub.verify_token": "guess", "hub.challenge": "c"})
    assert (refused.status_code, refused.json()) == (401, {"ok": False, "code": "X_WEBHOOK_SIGNATURE_INVALID"})
    other = Client().delete(URL)
    assert (other.status_code, other["Allow"], other.json()["code"]) == (405, "GET, POST",
                                                                         "X_WEBHOOK_METHOD_NOT_ALLOWED")
    assert not Job.objects.filter(name=receiver.name).exists()


def test_verify_may_answer_a_posted_challenge_itself(declare) -> None:
    def verify(inbound: Any) -> Any:
        verify_webhook_signature(inbound.body, inbound.headers, SECRET)
        data = json.loads(inbound.body)
        if data.get("type") == "url_verification":
            return {"answer": {"challenge": data["challenge"]}}
        return {"event_id": inbound.headers["X-Ultimate-Webhook-Id"], "payload": data}

    receiver = declare(verify=verify)
    body = json.dumps({"type": "url_verification", "challenge": "planted-c-31"}).encode()
    response = Client().post(URL, data=body, content_type="application/json", **meta(headers(body, "evt_c")))
    assert (response.status_code, response.json()) == (200, {"challenge": "planted-c-31"})
    assert not Job.objects.filter(name=receiver.name).exists()


def test_a_handshake_may_answer_its_own_response(declare) -> None:
    declare(handshake=lambda inbound: HttpResponse("pong-77", status=202, headers={"X-Planted": "h-4"}))
    response = Client().get(URL)
    assert (response.status_code, response.content, response["X-Planted"]) == (202, b"pong-77", "h-4")


@pytest.mark.parametrize("t", ["²", "١٧٠٠٠٠٠٠٠٠", "1７00000000"])
def test_a_non_ascii_digit_in_the_signature_header_is_a_coded_refusal(declare, t: str) -> None:
    body = b'{"n": 1}'
    bad = {"X-Ultimate-Webhook-Signature": f"t={t},v1={'a' * 64}", "X-Ultimate-Webhook-Id": "evt_1",
           "X-Ultimate-Webhook-Topic": "invoice.paid"}
    with pytest.raises(JobsError) as err:
        verify_webhook_signature(body, bad, SECRET)
    assert err.value.code == "X_WEBHOOK_SIGNATURE_INVALID"
    receiver = declare()
    response = Client().post(URL, data=body, content_type="application/json", **meta(bad))
    assert (response.status_code, response.json()["code"]) == (401, "X_WEBHOOK_SIGNATURE_INVALID")
    assert not Job.objects.filter(name=receiver.name).exists()


def test_a_non_ascii_mac_is_a_coded_refusal_not_a_type_error() -> None:
    t = int(clock.now().timestamp())
    bad = {"X-Ultimate-Webhook-Signature": f"t={t},v1={'é' * 64}", "X-Ultimate-Webhook-Id": "evt_1",
           "X-Ultimate-Webhook-Topic": "invoice.paid"}
    with pytest.raises(JobsError) as err:
        verify_webhook_signature(b"{}", bad, SECRET)
    assert err.value.code == "X_WEBHOOK_SIGNATURE_INVALID"


def test_a_captured_signature_cannot_be_replayed_under_an_id_holding_a_colon(declare) -> None:
    t = int(clock.now().timestamp())
    signature = f"t={t},v1={mac(t, 'evt_9', 'invoice', b'paid:{}')}"  # genuine: id evt_9, topic invoice
    genuine = {"X-Ultimate-Webhook-Signature": signature, "X-Ultimate-Webhook-Id": "evt_9",
               "X-Ultimate-Webhook-Topic": "invoice"}
    assert verify_webhook_signature(b"paid:{}", genuine, SECRET)
    # The same signed bytes v1:<t>:evt_9:invoice:paid:{} read as id "evt_9:invoice", topic "paid", body "{}".
    shifted = {"X-Ultimate-Webhook-Signature": signature, "X-Ultimate-Webhook-Id": "evt_9:invoice",
               "X-Ultimate-Webhook-Topic": "paid"}
    with pytest.raises(JobsError) as err:
        verify_webhook_signature(b"{}", shifted, SECRET)
    assert err.value.code == "X_WEBHOOK_SIGNATURE_INVALID"
    receiver = declare()
    response = Client().post(URL, data=b"{}", content_type="application/json", **meta(shifted))
    assert (response.status_code, response.json()["code"]) == (401, "X_WEBHOOK_SIGNATURE_INVALID")
    assert not Job.objects.filter(name=receiver.name).exists()


def test_the_sender_refuses_an_event_id_holding_a_colon(tables, declare_webhook, receiver) -> None:
    from ultimate_jobs.testing import run_job

    deliver = declare_webhook()
    tables.endpoint("ep_1", receiver.url)
    tables.events["evt"] = {"id": "evt:7", "topic": "invoice.paid", "body": "x"}
    trace = run_job(deliver, endpoint_id="ep_1", event_id="evt")
    assert (trace.state, trace.error_code, receiver.requests) == ("dead", "X_WEBHOOK_EVENT_INVALID", [])
    assert issubclass(Terminal, JobsError)


class Stream:
    """An ASGI client that offers a body in ``chunks`` pieces and counts how many were taken."""

    def __init__(self, chunks: int, size: int) -> None:
        self.left, self.size, self.taken = chunks, size, 0
        self.sent: list[dict[str, Any]] = []

    async def receive(self) -> dict[str, Any]:
        if self.left == 0:
            await asyncio.sleep(3600)  # a disconnect is never sent while the request is served
        self.left -= 1
        self.taken += 1
        return {"type": "http.request", "body": b"x" * self.size, "more_body": self.left > 0}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)


def scope(path: str) -> dict[str, Any]:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
            "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"",
            "headers": [(b"host", b"testserver"), (b"content-type", b"application/json")],
            "server": ("testserver", 80), "client": ("127.0.0.1", 5000)}


def test_under_asgi_a_receivers_body_is_capped_while_it_streams(declare) -> None:
    receiver = declare(max_bytes=4096)
    app = limit_receiver_bodies(get_asgi_application())
    big = Stream(chunks=1000, size=1024)  # 1000 KiB offered, 4 KiB allowed
    asyncio.run(asyncio.wait_for(app(scope(URL), big.receive, big.send), 30))
    assert big.sent[0]["status"] == 413
    assert json.loads(big.sent[1]["body"]) == {"ok": False, "code": "X_WEBHOOK_BODY_TOO_LARGE"}
    assert big.taken <= 5  # stopped at the cap: never the 1000 pieces
    assert not Job.objects.filter(name=receiver.name).exists()


def test_under_asgi_a_body_within_the_cap_reaches_the_receiver_whole(declare) -> None:
    seen: list[bytes] = []

    def verify(inbound: Any) -> Any:
        seen.append(inbound.body)
        return {"event_id": "evt_asgi_5", "payload": {"n": len(inbound.body)}}

    receiver = declare(max_bytes=4096, verify=verify)
    app = limit_receiver_bodies(get_asgi_application())
    small = Stream(chunks=3, size=1000)
    asyncio.run(asyncio.wait_for(app(scope(URL), small.receive, small.send), 30))
    assert small.sent[0]["status"] == 200 and seen == [b"x" * 3000]
    assert Job.objects.get(name=receiver.name).payload["payload"] == {"n": 3000}
