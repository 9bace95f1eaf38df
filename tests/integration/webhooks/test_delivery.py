"""webhook(): what a real receiver on 127.0.0.1 sees, and how each answer settles the job."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta

import pytest

from tests.integration.webhooks.conftest import SECRET, Receiver, Tables
from ultimate_jobs import JobsError, ops, verify_webhook_signature
from ultimate_jobs.models import Job, WebhookDelivery, WebhookEndpointState
from ultimate_jobs.testing import freeze_clock, run_job
from ultimate_jobs.testing.runner import Runner
from ultimate_jobs.webhooks import ModelLedger

pytestmark = pytest.mark.django_db(transaction=True)
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def test_a_2xx_delivers_the_signed_body_once_and_ends_the_job(receiver: Receiver, tables: Tables,
                                                                 declare_webhook) -> None:
    deliver = declare_webhook()
    ep = tables.endpoint("ep_1", f"{receiver.url}/hooks?x=1", headers={"X-Partner": "acme",
                                                                        "X-Ultimate-Webhook-Id": "forged"})
    ev = tables.event("evt_1", body={"invoice": "inv_42", "amount": 1999})
    with freeze_clock(NOW):
        trace = run_job(deliver, endpoint_id=ep, event_id=ev)
    assert (trace.state, trace.result) == ("done", {"status": 200, "endpoint_id": "ep_1", "event_id": "evt_1",
                                                    "attempt": 1})
    [seen] = receiver.requests
    assert seen.path == "/hooks?x=1"
    assert json.loads(seen.body) == {"invoice": "inv_42", "amount": 1999}
    headers = {k.lower(): v for k, v in seen.headers.items()}
    assert headers["x-partner"] == "acme"  # the endpoint's headers are sent
    assert headers["x-ultimate-webhook-id"] == "evt_1"  # ...under ours: a stored header cannot forge the id
    assert headers["x-ultimate-webhook-topic"] == "invoice.paid"
    assert headers["content-type"] == "application/json"
    t = int(NOW.timestamp())
    mac = hmac.new(SECRET.encode(), f"v1:{t}:evt_1:invoice.paid:".encode() + seen.body, hashlib.sha256).hexdigest()
    assert headers["x-ultimate-webhook-signature"] == f"t={t},v1={mac}"
    assert verify_webhook_signature(seen.body, seen.headers, SECRET, now=NOW)
    [row] = WebhookDelivery.objects.values("endpoint_id", "event_id", "attempt", "status_code", "error_code")
    assert row == {"endpoint_id": "ep_1", "event_id": "evt_1", "attempt": 1, "status_code": 200, "error_code": None}
    assert [d["status_code"] for d in ops.get_job(trace.id)["webhook"]] == [200]


def test_the_key_is_name_endpoint_event_and_a_live_duplicate_dedupes(tables: Tables, declare_webhook) -> None:
    deliver = declare_webhook()
    first = deliver.enqueue(endpoint_id="ep_1", event_id="evt_1")
    again = deliver.enqueue(endpoint_id="ep_1", event_id="evt_1")
    other = deliver.enqueue(endpoint_id="ep_2", event_id="evt_1")
    assert Job.objects.get(id=first.id).idempotency_key == "tests.webhooks.deliver:ep_1:evt_1"
    assert (again.id, again.deduped, other.deduped) == (first.id, True, False)


def test_a_500_retries_signing_again_at_send_time_then_succeeds(receiver: Receiver, tables: Tables,
                                                                declare_webhook) -> None:
    receiver.script = [500, 200]
    deliver = declare_webhook()
    tables.endpoint("ep_1", receiver.url)
    tables.event("evt_1", body="plain text")
    with freeze_clock(NOW):
        trace = run_job(deliver, endpoint_id="ep_1", event_id="evt_1")
    assert (trace.state, trace.attempt) == ("done", 2)
    first, second = receiver.requests
    assert first.body == second.body == b"plain text"
    t1 = first.headers["X-Ultimate-Webhook-Signature"].split(",")[0]
    t2 = second.headers["X-Ultimate-Webhook-Signature"].split(",")[0]
    assert t1 == f"t={int(NOW.timestamp())}" and t2 == f"t={int(NOW.timestamp()) + 1}"  # after the 1s retry delay
    rows = list(WebhookDelivery.objects.order_by("attempt").values_list("attempt", "status_code", "error_code"))
    assert rows == [(1, 500, "X_WEBHOOK_DELIVERY_FAILED"), (2, 200, None)]
    assert WebhookEndpointState.objects.get(endpoint_id="ep_1").consecutive_failures == 0  # a 2xx resets


def test_a_410_is_rejected_and_a_302_is_never_followed(receiver: Receiver, tables: Tables, declare_webhook) -> None:
    receiver.script = [410, (302, {"Location": f"{receiver.url}/elsewhere"}), 410]
    deliver = declare_webhook()
    tables.endpoint("ep_1", receiver.url)
    tables.event("evt_1")
    with freeze_clock(NOW):
        trace = run_job(deliver, endpoint_id="ep_1", event_id="evt_1")
    assert (trace.state, trace.attempt, trace.error_code) == ("dead", 3, "X_WEBHOOK_DELIVERY_REJECTED")
    assert [r.path for r in receiver.requests] == ["/", "/", "/"]  # nothing went to /elsewhere
    codes = list(WebhookDelivery.objects.order_by("attempt").values_list("status_code", flat=True))
    assert codes == [410, 302, 410]


@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_is_honoured(status: int, receiver: Receiver, tables: Tables, declare_webhook) -> None:
    receiver.script = [(status, {"Retry-After": "120"}), 200]
    deliver = declare_webhook()
    tables.endpoint("ep_1", receiver.url)
    tables.event("evt_1")
    with freeze_clock(NOW):
        enqueued = deliver.enqueue(endpoint_id="ep_1", event_id="evt_1")
        runner = Runner()
        runner.run(runner.claim(enqueued.id))
        row = Job.objects.get(id=enqueued.id)
        assert (row.state, row.error_code) == ("delayed", "X_WEBHOOK_DELIVERY_THROTTLED")
        assert row.run_at >= NOW + timedelta(seconds=120)  # the policy alone would wait 1s
        assert runner.claim(enqueued.id) is None  # not before
    assert len(receiver.requests) == 1


def test_an_http_date_retry_after_is_honoured_too(receiver: Receiver, tables: Tables, declare_webhook) -> None:
    receiver.script = [(429, {"Retry-After": "Mon, 01 Jun 2026 12:05:00 GMT"})]
    deliver = declare_webhook()
    tables.endpoint("ep_1", receiver.url)
    tables.event("evt_1")
    with freeze_clock(NOW):
        enqueued = deliver.enqueue(endpoint_id="ep_1", event_id="evt_1")
        Runner().run(Runner().claim(enqueued.id))
        assert Job.objects.get(id=enqueued.id).run_at >= NOW + timedelta(minutes=5)


def test_disable_after_consecutive_failures_then_no_request_until_enabled(receiver: Receiver, tables: Tables,
                                                                          declare_webhook) -> None:
    receiver.script = [500]
    deliver = declare_webhook(disable_after=3)
    tables.endpoint("ep_1", receiver.url)
    for n in range(3):
        tables.event(f"evt_{n}")
    with freeze_clock(NOW):
        first = run_job(deliver, endpoint_id="ep_1", event_id="evt_0")
        assert (first.state, first.attempt, first.error_code) == ("dead", 3, "X_WEBHOOK_ENDPOINT_DISABLED")
        assert len(receiver.requests) == 3
        state = WebhookEndpointState.objects.get(endpoint_id="ep_1")
        assert state.disabled_at is not None
        later = run_job(deliver, endpoint_id="ep_1", event_id="evt_1")
        assert (later.state, later.attempt, later.error_code) == ("dead", 1, "X_WEBHOOK_ENDPOINT_DISABLED")
        assert len(receiver.requests) == 3  # no request for a disabled endpoint
        ModelLedger().enable("ep_1")
        receiver.script = [200]
        again = run_job(deliver, endpoint_id="ep_1", event_id="evt_2")
    assert again.state == "done" and len(receiver.requests) == 4


def test_an_endpoint_flagged_disabled_by_the_app_gets_no_request(receiver: Receiver, tables: Tables,
                                                                 declare_webhook) -> None:
    deliver = declare_webhook()
    tables.endpoint("ep_1", receiver.url, disabled=True)
    tables.event("evt_1")
    trace = run_job(deliver, endpoint_id="ep_1", event_id="evt_1")
    assert (trace.state, trace.error_code, receiver.requests) == ("dead", "X_WEBHOOK_ENDPOINT_DISABLED", [])


def test_unknown_endpoint_and_event_are_terminal(receiver: Receiver, tables: Tables, declare_webhook) -> None:
    deliver = declare_webhook()
    tables.endpoint("ep_1", receiver.url)
    tables.event("evt_1", body=12)
    gone = run_job(deliver, endpoint_id="ep_missing", event_id="evt_1")
    missing = run_job(deliver, endpoint_id="ep_1", event_id="evt_missing")
    bad = run_job(deliver, endpoint_id="ep_1", event_id="evt_1")
    assert [(t.state, t.attempt, t.error_code) for t in (gone, missing, bad)] == [
        ("dead", 1, "X_WEBHOOK_ENDPOINT_UNKNOWN"), ("dead", 1, "X_WEBHOOK_EVENT_UNKNOWN"),
        ("dead", 1, "X_WEBHOOK_EVENT_INVALID")]
    assert receiver.requests == []


def test_a_slow_receiver_is_cut_at_the_timeout(receiver: Receiver, tables: Tables, declare_webhook) -> None:
    receiver.script = [("hang", 3)]
    deliver = declare_webhook(timeout="1s", retry=1)
    tables.endpoint("ep_1", receiver.url)
    tables.event("evt_1")
    trace = run_job(deliver, endpoint_id="ep_1", event_id="evt_1")
    assert trace.state == "dead" and trace.error_code in ("X_WEBHOOK_DELIVERY_FAILED", "X_JOB_TIMEOUT")
    assert len(receiver.requests) == 1


def test_plain_http_needs_allow_private_or_the_setting(receiver: Receiver, tables: Tables, declare_webhook,
                                                       settings) -> None:
    deliver = declare_webhook(allow_private=False)
    tables.endpoint("ep_1", "http://example.com/hook")
    tables.event("evt_1")
    trace = run_job(deliver, endpoint_id="ep_1", event_id="evt_1")
    assert (trace.state, trace.attempt, trace.error_code) == ("dead", 1, "X_WEBHOOK_ENDPOINT_INVALID")
    assert "http://" in trace.last_error
    [row] = WebhookDelivery.objects.values("status_code", "error_code")
    assert row == {"status_code": None, "error_code": "X_WEBHOOK_ENDPOINT_INVALID"}


def test_declaration_refusals() -> None:
    from ultimate_jobs import NO_TENANT, webhook

    good = {"name": "tests.webhooks.refused", "tenant": NO_TENANT, "endpoint": lambda **_: None,
            "event": lambda **_: None, "ledger": ModelLedger()}
    for bad, code in ((dict(tenant=None), "X_JOB_TENANT_REQUIRED"), (dict(endpoint="x"), "X_JOB_DECLARATION_INVALID"),
                      (dict(ledger=object()), "X_JOB_DECLARATION_INVALID"),
                      (dict(disable_after=0), "X_JOB_DECLARATION_INVALID"),
                      (dict(timeout="-1s"), "X_JOB_DECLARATION_INVALID")):
        with pytest.raises(JobsError) as err:
            webhook(**{**good, **bad})
        assert err.value.code == code
    from ultimate_jobs.registry import get_job_handle

    assert get_job_handle("tests.webhooks.refused") is None  # nothing declared


def test_without_httpx_a_delivery_fails_with_a_clear_code(receiver: Receiver, tables: Tables, declare_webhook,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "httpx", None)  # what an install without the webhooks extra sees
    deliver = declare_webhook()
    tables.endpoint("ep_1", receiver.url)
    tables.event("evt_1")
    trace = run_job(deliver, endpoint_id="ep_1", event_id="evt_1")
    assert (trace.state, trace.attempt, trace.error_code) == ("dead", 1, "X_WEBHOOK_HTTPX_MISSING")
    assert "ultimate-jobs[webhooks]" in trace.last_error
    assert receiver.requests == []


def test_declaring_and_receiving_never_import_httpx() -> None:
    import subprocess
    import sys

    code = ("import sys, django; from django.conf import settings; "
            "settings.configure(INSTALLED_APPS=['ultimate_jobs'], DATABASES={'default': {'ENGINE': "
            "'django.db.backends.sqlite3', 'NAME': ':memory:'}}, ROOT_URLCONF='ultimate_jobs.urls'); django.setup(); "
            "import ultimate_jobs.webhooks, ultimate_jobs.urls; "
            "from ultimate_jobs import NO_TENANT, webhook, consumer; "
            "webhook(name='w', tenant=NO_TENANT, endpoint=lambda **_: None, event=lambda **_: None, "
            "ledger=ultimate_jobs.webhooks.ModelLedger()); print('httpx' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr
