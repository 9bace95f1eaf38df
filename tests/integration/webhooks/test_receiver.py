"""webhook_receiver(): the view mounted by ultimate_jobs.urls, through Django's test client with
CSRF checks on, and the job it enqueues."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import OperationalError
from django.test import Client

from ultimate_jobs import NO_TENANT, JobsError, ops, verify_webhook_signature, webhook_receiver
from ultimate_jobs.models import Job, OutboxEntry
from ultimate_jobs.registry import unregister as _unregister
from ultimate_jobs.testing import drain

pytestmark = pytest.mark.django_db(transaction=True)
SECRET = "whsec-inbound"
SECRET_MARK = "card-4242-do-not-echo"


def sign(body: bytes, event_id: str, secret: str = SECRET, topic: str = "invoice.paid") -> dict[str, str]:
    from ultimate_jobs import clock

    t = int(clock.now().timestamp())
    mac = hmac.new(secret.encode(), f"v1:{t}:{event_id}:{topic}:".encode() + body, hashlib.sha256).hexdigest()
    return {"HTTP_X_ULTIMATE_WEBHOOK_SIGNATURE": f"t={t},v1={mac}", "HTTP_X_ULTIMATE_WEBHOOK_ID": event_id,
            "HTTP_X_ULTIMATE_WEBHOOK_TOPIC": topic}


@pytest.fixture
def handled() -> list[dict[str, Any]]:
    return []


@pytest.fixture
def declare(handled: list[dict[str, Any]]) -> Iterator[Callable[..., Any]]:
    names: list[str] = []
    verified: list[bytes] = []

    def verify(inbound: Any) -> dict[str, Any]:
        verified.append(inbound.body)
        verify_webhook_signature(inbound.body, inbound.headers, [SECRET, "whsec-previous"])
        return {"event_id": inbound.headers["X-Ultimate-Webhook-Id"],
                "payload": {"body": json.loads(inbound.body), "account": inbound.params.get("account")}}

    def handle(*, event_id: str, payload: Any, ctx: Any) -> dict[str, Any]:
        handled.append({"event_id": event_id, "payload": payload, "job_id": ctx.job_id})
        return {"seen": event_id}

    def make(name: str = "tests.webhooks.inbound", path: str = "hooks/billing/<str:account>/", **options: Any) -> Any:
        options.setdefault("verify", verify)
        handle_job = webhook_receiver(name=name, path=path, tenant=NO_TENANT, handle=handle, **options)
        names.append(name)
        handle_job.verified = verified  # type: ignore[attr-defined]
        return handle_job

    yield make
    for name in names:
        _unregister(name)


def post(body: bytes, headers: dict[str, str], url: str = "/jobs/hooks/billing/acme/") -> Any:
    return Client(enforce_csrf_checks=True).post(url, data=body, content_type="application/json", **headers)


def test_a_verified_event_is_enqueued_then_answered_and_handled(declare, handled) -> None:
    receiver = declare()
    body = json.dumps({"invoice": "inv_42", "card": SECRET_MARK}).encode()
    response = post(body, sign(body, "evt_1"))
    assert response.status_code == 200  # no CSRF token, by design
    assert response.json() == {"ok": True, "event_id": "evt_1", "deduped": False}
    job = Job.objects.get(name=receiver.name)
    assert job.idempotency_key == "evt_1" and job.state == "ready"  # durable before the answer
    assert receiver.verified == [body]  # the exact bytes
    shown = ops.get_job(job.id)
    assert SECRET_MARK not in json.dumps(shown)  # the stored payload is sensitive
    drain()
    assert handled == [{"event_id": "evt_1", "payload": {"body": {"invoice": "inv_42", "card": SECRET_MARK},
                                                         "account": "acme"}, "job_id": job.id}]


def test_a_redelivery_while_live_is_deduped_and_after_settling_runs_again(declare, handled) -> None:
    receiver = declare(dedupe_window=0)  # no window: deduped only while the job is live
    body = b'{"invoice": "inv_1"}'
    first = post(body, sign(body, "evt_7")).json()
    again = post(body, sign(body, "evt_7")).json()
    assert (first["deduped"], again["deduped"]) == (False, True)
    assert Job.objects.filter(name=receiver.name).count() == 1
    drain()
    later = post(body, sign(body, "evt_7")).json()
    assert later["deduped"] is False  # at least once: the seen-set is the app's
    drain()
    assert [h["event_id"] for h in handled] == ["evt_7", "evt_7"]


def test_a_replay_after_the_job_settled_inside_the_window_is_not_handled_again(declare, handled) -> None:
    from datetime import UTC, datetime, timedelta

    from ultimate_jobs.testing import freeze_clock

    receiver = declare(dedupe_window="10m")
    body = b'{"invoice": "inv_replayed"}'
    start = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
    with freeze_clock(start):
        captured = sign(body, "evt_captured_3")
        assert post(body, captured).json()["deduped"] is False
        drain()
    with freeze_clock(start + timedelta(seconds=290)):  # inside verify's 300s tolerance: the signature passes
        replay = post(body, captured)
        drain()
    assert (replay.status_code, replay.json()) == (200, {"ok": True, "event_id": "evt_captured_3", "deduped": True})
    assert [h["event_id"] for h in handled] == ["evt_captured_3"]  # handled once
    assert Job.objects.filter(name=receiver.name).count() == 1
    with freeze_clock(start + timedelta(minutes=11)):  # past the window: a fresh resend is handled again
        resent = post(body, sign(body, "evt_captured_3")).json()
        drain()
    assert resent["deduped"] is False and [h["event_id"] for h in handled] == ["evt_captured_3"] * 2


def test_a_bad_signature_is_401_with_a_code_nothing_queued_nothing_echoed(declare) -> None:
    receiver = declare()
    body = json.dumps({"card": SECRET_MARK}).encode()
    response = post(body, sign(body, "evt_1", secret="wrong"))
    assert response.status_code == 401
    assert response.json() == {"ok": False, "code": "X_WEBHOOK_SIGNATURE_INVALID"}
    assert not Job.objects.filter(name=receiver.name).exists() and not OutboxEntry.objects.exists()


def test_a_verifier_parse_error_quoting_the_body_answers_422_without_it(declare) -> None:
    def verify(inbound: Any) -> Any:
        raise ValueError(f"cannot parse {inbound.body!r}")

    receiver = declare(verify=verify)
    response = post(SECRET_MARK.encode(), {})
    assert response.status_code == 422 and SECRET_MARK not in response.content.decode()
    assert response.json() == {"ok": False, "code": "X_WEBHOOK_BODY_INVALID"}
    assert not Job.objects.filter(name=receiver.name).exists()


def test_a_verifier_crash_of_another_kind_answers_401_without_the_body(declare) -> None:
    def verify(inbound: Any) -> Any:
        raise RuntimeError(f"hmac backend broke on {inbound.body!r}")

    receiver = declare(verify=verify)
    response = post(SECRET_MARK.encode(), {})
    assert response.status_code == 401 and SECRET_MARK not in response.content.decode()
    assert response.json() == {"ok": False, "code": "X_WEBHOOK_SIGNATURE_INVALID"}
    assert not Job.objects.filter(name=receiver.name).exists()


@pytest.mark.parametrize("event_id", ["", "has space", "x" * 257, "é", None])
def test_an_invalid_event_id_is_422(declare, event_id: Any) -> None:
    receiver = declare(verify=lambda inbound: {"event_id": event_id, "payload": {"card": SECRET_MARK}})
    response = post(b"{}", {})
    assert response.status_code == 422
    assert response.json() == {"ok": False, "code": "X_WEBHOOK_EVENT_ID_INVALID"}
    assert not Job.objects.filter(name=receiver.name).exists()


def test_an_event_id_of_256_characters_is_accepted_as_the_seeds_allow(declare) -> None:
    event_id = "e" * 256
    receiver = declare(verify=lambda inbound: {"event_id": event_id, "payload": {"n": 1}})
    response = post(b"{}", {})
    assert (response.status_code, response.json()["event_id"]) == (200, event_id)
    assert Job.objects.get(name=receiver.name).payload["event_id"] == event_id


def test_a_payload_that_is_not_json_is_422(declare) -> None:
    receiver = declare(verify=lambda inbound: {"event_id": "evt_1", "payload": {1: object()}})
    response = post(b"{}", {})
    assert (response.status_code, response.json()["code"]) == (422, "X_WEBHOOK_EVENT_INVALID")
    assert not Job.objects.filter(name=receiver.name).exists()


def test_a_body_over_max_bytes_is_413_before_verify(declare) -> None:
    receiver = declare(max_bytes=64)
    body = b"x" * 65
    response = post(body, sign(body, "evt_1"))
    assert response.status_code == 413
    assert response.json() == {"ok": False, "code": "X_WEBHOOK_BODY_TOO_LARGE"}
    assert receiver.verified == [] and not Job.objects.filter(name=receiver.name).exists()
    exact = b'{"p":"' + b"y" * 56 + b'"}'  # 64 bytes: at the cap is accepted
    assert post(exact, sign(exact, "evt_2")).status_code == 200


def test_a_write_that_fails_is_503_with_retry_after(declare, monkeypatch: pytest.MonkeyPatch) -> None:
    from ultimate_jobs.db import store_for

    receiver = declare()
    store = type(store_for())

    def down(self: Any, **kwargs: Any) -> Any:
        raise OperationalError("the database is down")

    monkeypatch.setattr(store, "job_insert_many", down)
    body = b'{"invoice": "inv_1"}'
    response = post(body, sign(body, "evt_1"))
    assert response.status_code == 503 and response["Retry-After"] == "30"
    assert response.json() == {"ok": False, "code": "X_WEBHOOK_RECEIVER_UNAVAILABLE"}
    monkeypatch.undo()
    assert not Job.objects.filter(name=receiver.name).exists()


def test_only_post_is_served_and_the_refusal_is_coded(declare) -> None:
    declare()
    for response in (Client().get("/jobs/hooks/billing/acme/"), Client().put("/jobs/hooks/billing/acme/", b"{}")):
        assert response.status_code == 405 and response["Allow"] == "POST"
        assert response.json() == {"ok": False, "code": "X_WEBHOOK_METHOD_NOT_ALLOWED"}


def test_declaration_refusals() -> None:
    good: dict[str, Any] = {"name": "tests.webhooks.bad", "path": "hooks/x/", "tenant": NO_TENANT,
                            "verify": lambda i: {}, "handle": lambda **_: None}
    for bad in ({"path": "/hooks/x/"}, {"path": ""}, {"verify": None}, {"handle": "x"}, {"max_bytes": 0},
                {"tenant": None}, {"path": "hooks/<bogus:x>/"}, {"handshake": "challenge"},
                {"dedupe_window": "-1s"}, {"dedupe_window": "soon"}):
        with pytest.raises(JobsError) as err:
            webhook_receiver(**{**good, **bad})
        assert err.value.code == "X_WEBHOOK_RECEIVER_INVALID", bad
    from ultimate_jobs.registry import get_job_handle

    assert get_job_handle("tests.webhooks.bad") is None


def test_receipts_past_dead_retention_are_purged_and_recent_ones_kept() -> None:
    from datetime import UTC, datetime, timedelta

    from ultimate_jobs.conf import get_settings
    from ultimate_jobs.factories.webhook.ledger import webhook_deliveries
    from ultimate_jobs.models import WebhookReceipt

    now = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
    keep = get_settings().DEAD_RETENTION
    WebhookReceipt.objects.create(name="tests.r", event_id="evt_old_81", received_at=now - timedelta(seconds=keep + 60))
    WebhookReceipt.objects.create(name="tests.r", event_id="evt_new_82", received_at=now - timedelta(seconds=60))
    assert webhook_deliveries.purge_expired(now)["receipts"] == 1
    assert list(WebhookReceipt.objects.values_list("event_id", flat=True)) == ["evt_new_82"]
