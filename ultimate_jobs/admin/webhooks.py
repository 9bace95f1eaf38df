"""Internal: the webhook delivery ledger in the admin, read-only.

One row per delivery attempt (``WebhookDelivery``: endpoint, event, attempt, status, duration,
error code — the body is never stored), filterable by webhook name, status and error code and
searchable by endpoint or event id; and the endpoints' state (consecutive failures, disabled).
Nothing here writes: re-enabling an endpoint is the app's decision
(``ultimate_jobs.webhooks.ModelLedger().enable(endpoint_id)``). Viewing needs the model's
``view`` permission, as any admin page.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from ultimate_jobs.models import WebhookDelivery, WebhookEndpointState


class _ReadOnly(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class WebhookDeliveryAdmin(_ReadOnly):
    list_display = ("delivered_at", "name", "endpoint_id", "event_id", "topic", "attempt", "status_code",
                    "error_code", "duration_ms", "job_id")
    list_filter = ("name", "status_code", "error_code")
    search_fields = ("=endpoint_id", "=event_id")
    ordering = ("-delivered_at",)
    date_hierarchy = "delivered_at"
    show_full_result_count = False  # no COUNT(*) over a large ledger on every page


class WebhookEndpointStateAdmin(_ReadOnly):
    list_display = ("endpoint_id", "consecutive_failures", "disabled_at", "last_error_code", "updated_at")
    list_filter = ("last_error_code",)
    search_fields = ("=endpoint_id",)


admin.site.register(WebhookDelivery, WebhookDeliveryAdmin)
admin.site.register(WebhookEndpointState, WebhookEndpointStateAdmin)
