"""Internal: the webhook delivery ledger in the admin, read-only.

One row per delivery attempt (``WebhookDelivery``: endpoint, event, attempt, status, duration,
error code — the body is never stored), filterable by webhook name, status and error code and
searchable by endpoint or event id; and the endpoints' state per declaration and tenant
(consecutive failures, disabled).
Nothing here writes: re-enabling an endpoint is the app's decision
(``ultimate_jobs.webhooks.ModelLedger().enable(endpoint_id)``). Viewing needs the model's
``view`` permission, as any admin page.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import admin
from django.http import HttpRequest

from ultimate_jobs.models import WebhookDelivery, WebhookEndpointState

if TYPE_CHECKING:
    _DeliveryAdmin = admin.ModelAdmin[WebhookDelivery]
    _EndpointStateAdmin = admin.ModelAdmin[WebhookEndpointState]
else:  # django-stubs types ModelAdmin over its model; Django's class takes no subscript at run time
    _DeliveryAdmin = _EndpointStateAdmin = admin.ModelAdmin


class _ReadOnly:
    """No add, change or delete: mixed in before the ``ModelAdmin``, so its answers win."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class WebhookDeliveryAdmin(_ReadOnly, _DeliveryAdmin):
    list_display = ("delivered_at", "name", "endpoint_id", "event_id", "topic", "attempt", "status_code",
                    "error_code", "duration_ms", "job_id")
    list_filter = ("name", "status_code", "error_code")
    search_fields = ("=endpoint_id", "=event_id")
    ordering = ("-delivered_at",)
    date_hierarchy = "delivered_at"
    show_full_result_count = False  # no COUNT(*) over a large ledger on every page


class WebhookEndpointStateAdmin(_ReadOnly, _EndpointStateAdmin):
    list_display = ("endpoint_id", "name", "tenant_id", "consecutive_failures", "disabled_at", "last_error_code",
                    "updated_at")
    list_filter = ("name", "last_error_code")
    search_fields = ("=endpoint_id",)


admin.site.register(WebhookDelivery, WebhookDeliveryAdmin)
admin.site.register(WebhookEndpointState, WebhookEndpointStateAdmin)
