"""The delivery ledger in the admin: listed, searchable, and read-only."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ultimate_jobs.models import WebhookDelivery, WebhookEndpointState

pytestmark = pytest.mark.django_db


def test_deliveries_are_listed_and_read_only(admin_client) -> None:
    row = WebhookDelivery.objects.create(name="billing.webhooks", endpoint_id="ep_planted_7", event_id="evt_planted_9",
                                         topic="invoice.paid", attempt=2, status_code=503, duration_ms=12,
                                         error_code="X_WEBHOOK_DELIVERY_THROTTLED",
                                         delivered_at=datetime(2026, 6, 1, tzinfo=UTC))
    WebhookEndpointState.objects.create(name="billing.webhooks", tenant_id="org_planted_3", endpoint_id="ep_planted_7",
                                        consecutive_failures=4, updated_at=datetime(2026, 6, 1, tzinfo=UTC))
    page = admin_client.get("/admin/ultimate_jobs/webhookdelivery/", {"q": "evt_planted_9"}).content.decode()
    assert "ep_planted_7" in page and "X_WEBHOOK_DELIVERY_THROTTLED" in page
    state = admin_client.get("/admin/ultimate_jobs/webhookendpointstate/").content.decode()
    assert "ep_planted_7" in state and "org_planted_3" in state  # the count is per declaration and tenant
    assert admin_client.get("/admin/ultimate_jobs/webhookdelivery/add/").status_code == 403
    delete = admin_client.post(f"/admin/ultimate_jobs/webhookdelivery/{row.pk}/delete/", {"post": "yes"})
    assert delete.status_code == 403
    admin_client.post(f"/admin/ultimate_jobs/webhookdelivery/{row.pk}/change/", {"status_code": "200"})
    row.refresh_from_db()
    assert row.status_code == 503 and WebhookDelivery.objects.count() == 1
