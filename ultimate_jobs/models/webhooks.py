"""Internal: the webhook ledger tables, and the consumers' per-key report.

``WebhookDelivery`` is one row per delivery attempt of ``webhook()`` through
``ultimate_jobs.webhooks.ModelLedger``: who, what, when and how it ended — never the body, which
may hold a customer's data and belongs to the app's own event table. ``WebhookEndpointState``
counts an endpoint's consecutive failures per (declaration, tenant, endpoint) and marks it
disabled; only the app re-enables it.
``WebhookReceipt`` is one row per inbound event a receiver accepted (its replay window).
``ConsumerState`` is what ``consumer()`` reports per key (``ops.get_job()["consumer"]``), written
in the same transaction as the batch it describes.
"""

from __future__ import annotations

from django.db import models

from ultimate_jobs.ids import uuid7


class WebhookDelivery(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    name = models.CharField(max_length=200)
    job_id = models.UUIDField(null=True, blank=True)
    tenant_id = models.CharField(max_length=200, null=True, blank=True)
    endpoint_id = models.CharField(max_length=200)
    event_id = models.CharField(max_length=200)
    topic = models.CharField(max_length=200, blank=True, default="")
    attempt = models.IntegerField()
    status_code = models.IntegerField(null=True, blank=True)
    duration_ms = models.IntegerField(default=0)
    error_code = models.CharField(max_length=64, null=True, blank=True)
    delivered_at = models.DateTimeField()

    class Meta:
        db_table = "ultimate_jobs_webhookdelivery"
        indexes = [
            models.Index(fields=["job_id"], name="ultimate_jobs_whd_job"),
            models.Index(fields=["endpoint_id", "delivered_at"], name="ultimate_jobs_whd_endpoint"),
            models.Index(fields=["delivered_at"], name="ultimate_jobs_whd_age"),  # the retention purge
        ]
        verbose_name_plural = "webhook deliveries"

    def __str__(self) -> str:
        return f"{self.endpoint_id} {self.event_id} #{self.attempt} ({self.status_code or self.error_code})"


class WebhookEndpointState(models.Model):
    """One endpoint's count under one declaration and tenant (``tenant_id`` "" for none): one
    declaration's or tenant's failures never disable another's use of the same endpoint id."""

    id = models.BigAutoField(primary_key=True)
    name = models.CharField(max_length=200)
    tenant_id = models.CharField(max_length=200, blank=True, default="")
    endpoint_id = models.CharField(max_length=200)
    consecutive_failures = models.IntegerField(default=0)
    disabled_at = models.DateTimeField(null=True, blank=True)
    last_error_code = models.CharField(max_length=64, null=True, blank=True)
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "ultimate_jobs_webhookendpointstate"
        constraints = [models.UniqueConstraint(fields=["name", "tenant_id", "endpoint_id"],
                                               name="ultimate_jobs_whe_key")]
        indexes = [models.Index(fields=["endpoint_id"], name="ultimate_jobs_whe_endpoint")]  # enable(endpoint_id)

    def __str__(self) -> str:
        tenant = f" [{self.tenant_id}]" if self.tenant_id else ""
        return f"{self.name}{tenant} {self.endpoint_id} ({'disabled' if self.disabled_at else 'enabled'})"


class WebhookReceipt(models.Model):
    """An inbound event a ``webhook_receiver`` accepted: kept after its job settles, so a replay of
    the same event id inside the receiver's ``dedupe_window`` is answered, not handled again."""

    id = models.BigAutoField(primary_key=True)
    name = models.CharField(max_length=200)
    tenant_id = models.CharField(max_length=200, blank=True, default="")
    event_id = models.CharField(max_length=256)
    received_at = models.DateTimeField()

    class Meta:
        db_table = "ultimate_jobs_webhookreceipt"
        constraints = [models.UniqueConstraint(fields=["name", "tenant_id", "event_id"], name="ultimate_jobs_whr_key")]
        indexes = [models.Index(fields=["received_at"], name="ultimate_jobs_whr_age")]  # the retention purge

    def __str__(self) -> str:
        return f"{self.name} {self.event_id}"


class ConsumerState(models.Model):
    id = models.BigAutoField(primary_key=True)
    name = models.CharField(max_length=200)
    key = models.CharField(max_length=200)
    batches = models.BigIntegerField(default=0)
    items = models.BigIntegerField(default=0)
    lag = models.BigIntegerField(null=True, blank=True)
    last_batch_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "ultimate_jobs_consumerstate"
        constraints = [models.UniqueConstraint(fields=["name", "key"], name="ultimate_jobs_consumer_key")]

    def __str__(self) -> str:
        return f"{self.name}:{self.key}"
