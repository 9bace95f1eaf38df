"""webhook() against hostile or broken endpoints (issue 25): a malformed ``Retry-After`` is ignored
and the failure is still in the ledger; the failure count is per declaration, tenant and endpoint."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.integration.webhooks.conftest import Receiver, Tables
from ultimate_jobs.factories.webhook.transport import retry_after_seconds
from ultimate_jobs.models import WebhookDelivery, WebhookEndpointState
from ultimate_jobs.testing import freeze_clock, run_job
from ultimate_jobs.webhooks import ModelLedger

pytestmark = pytest.mark.django_db(transaction=True)
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize("value", ["²", "¹²", "٣", "-5", "1.5", "soon", "Mon, 99 Foo 2026 25:61:00 GMT"])
def test_a_malformed_retry_after_reads_as_absent(value: str) -> None:
    assert retry_after_seconds(value) is None


def test_a_malformed_retry_after_is_ignored_and_the_failure_recorded(receiver: Receiver, tables: Tables,
                                                                     declare_webhook) -> None:
    receiver.script = [(503, {"Retry-After": "²"})]
    deliver = declare_webhook(name="tests.webhooks.superscript", disable_after=2)
    tables.endpoint("ep_sup_9", receiver.url)
    tables.event("evt_sup_4")
    with freeze_clock(NOW):
        trace = run_job(deliver, endpoint_id="ep_sup_9", event_id="evt_sup_4")
    # Counted like any 503: the second failure reaches disable_after=2 and disables the endpoint.
    assert (trace.state, trace.attempt, trace.error_code) == ("dead", 2, "X_WEBHOOK_ENDPOINT_DISABLED")
    rows = list(WebhookDelivery.objects.order_by("attempt").values_list("endpoint_id", "event_id", "status_code",
                                                                          "error_code"))
    assert rows == [("ep_sup_9", "evt_sup_4", 503, "X_WEBHOOK_DELIVERY_FAILED")] * 2
    assert len(receiver.requests) == 2


def test_one_declarations_failures_do_not_disable_anothers_endpoint(receiver: Receiver, tables: Tables,
                                                                    declare_webhook) -> None:
    failing = declare_webhook(name="tests.webhooks.noisy", disable_after=2)
    quiet = declare_webhook(name="tests.webhooks.quiet", disable_after=2)
    tables.endpoint("ep_shared_3", receiver.url)
    tables.event("evt_a")
    tables.event("evt_b")
    receiver.script = [500]
    with freeze_clock(NOW):
        noisy = run_job(failing, endpoint_id="ep_shared_3", event_id="evt_a")
        assert noisy.error_code == "X_WEBHOOK_ENDPOINT_DISABLED"
        receiver.script = [200]
        fine = run_job(quiet, endpoint_id="ep_shared_3", event_id="evt_b")
    assert (fine.state, fine.result["endpoint_id"]) == ("done", "ep_shared_3")
    states = dict(WebhookEndpointState.objects.values_list("name", "disabled_at"))
    assert states["tests.webhooks.noisy"] is not None and states.get("tests.webhooks.quiet") is None
    ledger = ModelLedger()
    assert ledger.consecutive_failures("ep_shared_3", name="tests.webhooks.quiet", tenant_id=None) == 0
    assert ledger.consecutive_failures("ep_shared_3") > 2  # no name: the highest count, here disabled


def test_one_tenants_failures_do_not_disable_another_tenants_endpoint(receiver: Receiver, tables: Tables,
                                                                      declare_webhook) -> None:
    deliver = declare_webhook(name="tests.webhooks.tenanted", disable_after=2, tenant=lambda org, **_: org)
    tables.endpoint("ep_same_id", receiver.url)
    tables.event("evt_acme")
    tables.event("evt_globex")
    receiver.script = [500]
    with freeze_clock(NOW):
        acme = run_job(deliver, endpoint_id="ep_same_id", event_id="evt_acme", org="acme")
        assert acme.error_code == "X_WEBHOOK_ENDPOINT_DISABLED"
        receiver.script = [200]
        globex = run_job(deliver, endpoint_id="ep_same_id", event_id="evt_globex", org="globex")
    assert globex.state == "done"
    rows = sorted(WebhookEndpointState.objects.values_list("tenant_id", "consecutive_failures"))
    assert rows == [("acme", 2)]  # globex's 2xx reset nothing of acme's
    assert ModelLedger().enable("ep_same_id", name="tests.webhooks.tenanted", tenant_id="acme") == 1
    assert WebhookEndpointState.objects.get(tenant_id="acme").disabled_at is None


def test_a_name_is_resolved_within_the_deadline_and_a_dns_failure_is_recorded(receiver: Receiver, tables: Tables,
                                                                               declare_webhook) -> None:
    from ultimate_jobs.factories.webhook import addresses

    # The deadline path (a lookup on its own thread) answers what the system resolver answers.
    assert [str(a) for a in addresses.resolve("localhost", 443, timeout=10)][:1] in (["127.0.0.1"], ["::1"])
    deliver = declare_webhook(name="tests.webhooks.nxdomain", retry=1)
    tables.endpoint("ep_nx_5", "https://hooks.planted-5.invalid/hook")
    tables.event("evt_nx_6")
    trace = run_job(deliver, endpoint_id="ep_nx_5", event_id="evt_nx_6")
    assert (trace.state, trace.error_code) == ("dead", "X_WEBHOOK_DELIVERY_FAILED")
    rows = list(WebhookDelivery.objects.values_list("endpoint_id", "status_code", "error_code"))
    assert rows == [("ep_nx_5", None, "X_WEBHOOK_DELIVERY_FAILED")]  # in the ledger, and counted
    assert ModelLedger().consecutive_failures("ep_nx_5", name="tests.webhooks.nxdomain", tenant_id=None) == 1
