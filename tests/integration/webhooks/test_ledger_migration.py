"""Migration 0015_webhook_keys: a count kept per endpoint id before it is carried to every
(declaration, tenant) the ledger has deliveries for under that id; a disabled endpoint stays
disabled."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)
BEFORE = [("ultimate_jobs", "0013_write_path")]
AFTER = [("ultimate_jobs", "0015_webhook_keys")]
AT = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def test_old_counts_are_carried_to_each_declaration_and_tenant() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    state, delivery = old.get_model("ultimate_jobs", "WebhookEndpointState"), old.get_model("ultimate_jobs",
                                                                                            "WebhookDelivery")
    state.objects.create(endpoint_id="ep_mig_1", consecutive_failures=7, disabled_at=AT,
                         last_error_code="X_WEBHOOK_DELIVERY_FAILED", updated_at=AT)
    state.objects.create(endpoint_id="ep_gone_2", consecutive_failures=2, updated_at=AT)  # no delivery left
    for name, tenant in (("billing.hooks", "acme"), ("billing.hooks", None), ("audit.hooks", "acme"),
                         ("billing.hooks", "acme")):
        delivery.objects.create(name=name, tenant_id=tenant, endpoint_id="ep_mig_1", event_id="evt", attempt=1,
                                delivered_at=AT)
    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    new = executor.loader.project_state(AFTER).apps.get_model("ultimate_jobs", "WebhookEndpointState")
    rows = sorted(new.objects.values_list("name", "tenant_id", "endpoint_id", "consecutive_failures", "disabled_at"))
    assert rows == [("audit.hooks", "acme", "ep_mig_1", 7, AT), ("billing.hooks", "", "ep_mig_1", 7, AT),
                    ("billing.hooks", "acme", "ep_mig_1", 7, AT)]
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
