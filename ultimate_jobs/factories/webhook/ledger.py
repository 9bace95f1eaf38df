"""``ModelLedger``: the webhook delivery ledger over the shipped tables; the ledger seam it fills.

Usage::

    from ultimate_jobs.webhooks import ModelLedger

    ledger = ModelLedger()                         # the jobs database (ULTIMATE_JOBS["DATABASE"])
    ledger.consecutive_failures("ep_1", name="billing.webhooks", tenant_id="acme")   # -> 3
    ledger.enable("ep_1")                          # after the receiver was fixed: deliveries flow again

A ledger is any object with ``record(delivery)``, ``consecutive_failures(endpoint_id, *, name,
tenant_id)`` and ``disable(endpoint_id, *, name, tenant_id)``; ``webhook()`` calls ``record``
once per attempt that reached the sending stage, asks ``consecutive_failures`` before each request
(at ``disable_after`` or more the endpoint counts as disabled: ``X_WEBHOOK_ENDPOINT_DISABLED``, no
request), and calls ``disable`` when an attempt brings the count there. The count is per
(declaration ``name``, ``tenant_id``, endpoint): one declaration's or one tenant's failures never
disable another's. A ledger written before that (methods taking ``endpoint_id`` alone) is still
called with the endpoint id alone, and keys its count as it chooses.

``ModelLedger`` writes one ``WebhookDelivery`` row per attempt (endpoint id, event id, topic,
attempt, status code, duration, error code — never the body) and keeps the count in
``WebhookEndpointState``: a 2xx resets it, a failed, rejected or throttled request adds one, a
refusal before any request (an internal address) does not. ``disable`` stamps ``disabled_at``;
a disabled endpoint answers a count no ``disable_after`` is above until ``enable``. ``name`` left
out (None) means every declaration and tenant: ``consecutive_failures`` answers the highest,
``disable``/``enable`` act on every count of the endpoint. Rows are
purged after ``DEAD_RETENTION`` by the built-in retention purge (``webhook_deliveries``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol
from uuid import UUID

from django.db import IntegrityError, transaction
from django.db.models import F

from ultimate_jobs import clock
from ultimate_jobs.conf import get_settings
from ultimate_jobs.errors import X_WEBHOOK_DELIVERY_FAILED, X_WEBHOOK_DELIVERY_REJECTED, X_WEBHOOK_DELIVERY_THROTTLED
from ultimate_jobs.factories.purge import cancelled
from ultimate_jobs.models import WebhookDelivery, WebhookEndpointState, WebhookReceipt

# What counts against an endpoint: a request went out and did not end in a 2xx.
COUNTED = (X_WEBHOOK_DELIVERY_FAILED, X_WEBHOOK_DELIVERY_REJECTED, X_WEBHOOK_DELIVERY_THROTTLED)


@dataclass(frozen=True, slots=True, kw_only=True)
class Delivery:
    """One attempt, as a ledger records it. ``status_code`` is None when no response came back."""

    name: str
    job_id: UUID | None
    tenant_id: str | None
    endpoint_id: str
    event_id: str
    topic: str
    attempt: int
    status_code: int | None
    duration_ms: int
    error_code: str | None
    delivered_at: datetime

    @property
    def ok(self) -> bool:
        return self.error_code is None


class WebhookLedger(Protocol):
    def record(self, delivery: Delivery) -> None: ...

    def consecutive_failures(self, endpoint_id: str, *, name: str, tenant_id: str | None) -> int: ...

    def disable(self, endpoint_id: str, *, name: str, tenant_id: str | None) -> None: ...


def _keyed(name: str | None, tenant_id: str | None) -> dict[str, str]:
    """The filter of one count (``name`` given) or of every count of the endpoint (``name`` None)."""
    return {} if name is None else {"name": name, "tenant_id": tenant_id or ""}


class ModelLedger:
    """The ledger over ``WebhookDelivery`` and ``WebhookEndpointState`` on the jobs database."""

    def __init__(self, database: str | None = None) -> None:
        self._database = database

    @property
    def alias(self) -> str:
        return self._database or get_settings().DATABASE

    def __repr__(self) -> str:
        return f"<ModelLedger database={self.alias!r}>"

    def record(self, delivery: Delivery) -> None:
        """Write the attempt's row and move the endpoint's count (a failure: in one transaction)."""
        now = clock.now()
        row = WebhookDelivery(
            name=delivery.name, job_id=delivery.job_id, tenant_id=delivery.tenant_id,
            endpoint_id=delivery.endpoint_id, event_id=delivery.event_id, topic=delivery.topic[:200],
            attempt=delivery.attempt, status_code=delivery.status_code, duration_ms=delivery.duration_ms,
            error_code=delivery.error_code, delivered_at=delivery.delivered_at)
        key = {"name": delivery.name, "tenant_id": delivery.tenant_id or "", "endpoint_id": delivery.endpoint_id}
        if delivery.ok:
            # The common case in two statements, no transaction: a reset that did not land leaves a
            # count too high by the failures before this success, never one too low.
            row.save(using=self.alias, force_insert=True)
            WebhookEndpointState.objects.using(self.alias).filter(**key, consecutive_failures__gt=0).update(
                consecutive_failures=0, last_error_code=None, updated_at=now)
            return
        with transaction.atomic(using=self.alias):
            row.save(using=self.alias, force_insert=True)
            if delivery.error_code in COUNTED:
                self._state(key, now, consecutive_failures=F("consecutive_failures") + 1,
                            last_error_code=delivery.error_code)

    def _state(self, key: dict[str, str], now: datetime, **values: Any) -> None:
        rows = WebhookEndpointState.objects.using(self.alias)
        if rows.filter(**key).update(updated_at=now, **values):
            return
        created = {k: (1 if k == "consecutive_failures" and not isinstance(v, int) else v) for k, v in values.items()}
        try:
            with transaction.atomic(using=self.alias):
                rows.create(**key, updated_at=now, **created)
        except IntegrityError:  # a concurrent first delivery created it: update that row
            rows.filter(**key).update(updated_at=now, **values)

    def consecutive_failures(self, endpoint_id: str, *, name: str | None = None,
                             tenant_id: str | None = None) -> int:
        """The failures since the last 2xx of ``endpoint_id`` under declaration ``name`` and
        ``tenant_id``; ``sys.maxsize`` while it is disabled. ``name`` None: the highest of every
        declaration's and tenant's count of the endpoint."""
        rows = WebhookEndpointState.objects.using(self.alias).filter(endpoint_id=endpoint_id, **_keyed(name, tenant_id))
        highest = 0
        for row in rows.values("consecutive_failures", "disabled_at")[:1000]:
            if row["disabled_at"] is not None:
                return sys.maxsize
            highest = max(highest, int(row["consecutive_failures"]))
        return highest

    def disable(self, endpoint_id: str, *, name: str | None = None, tenant_id: str | None = None) -> None:
        """Mark the endpoint disabled under ``name`` and ``tenant_id`` (``name`` None: every count
        of it there is): every delivery it covers is refused until ``enable``."""
        now = clock.now()
        if name is None:
            WebhookEndpointState.objects.using(self.alias).filter(endpoint_id=endpoint_id).update(
                disabled_at=now, updated_at=now)
            return
        self._state({"endpoint_id": endpoint_id, **_keyed(name, tenant_id)}, now, disabled_at=now)

    def enable(self, endpoint_id: str, *, name: str | None = None, tenant_id: str | None = None) -> int:
        """Re-enable a disabled endpoint and reset its count (``name`` None: under every
        declaration and tenant); answer how many counts changed. The app's decision, never automatic."""
        return WebhookEndpointState.objects.using(self.alias).filter(
            endpoint_id=endpoint_id, **_keyed(name, tenant_id)).update(
            disabled_at=None, consecutive_failures=0, updated_at=clock.now())


class WebhookDeliveries:
    """Retention target: ledger rows and inbound receipts older than ``DEAD_RETENTION``, ``batch``
    rows a statement."""

    name = "webhook-deliveries"

    def __init__(self, *, batch: int = 1000) -> None:
        self.batch = batch

    def __repr__(self) -> str:
        return f"<WebhookDeliveries batch={self.batch}>"

    def purge_expired(self, now: datetime) -> dict[str, int]:
        alias = get_settings().DATABASE
        cutoff = now - timedelta(seconds=get_settings().DEAD_RETENTION)
        deliveries = WebhookDelivery.objects.using(alias)
        receipts = WebhookReceipt.objects.using(alias)
        counts = {"deliveries": 0, "receipts": 0, "batches": 0}
        while not cancelled():
            ids = list(deliveries.filter(delivered_at__lt=cutoff).order_by("delivered_at").values_list(
                "id", flat=True)[: self.batch])
            counts["deliveries"] += deliveries.filter(id__in=ids).delete()[0] if ids else 0
            counts["batches"] += 1
            if len(ids) < self.batch:
                break
        while not cancelled():
            pks = list(receipts.filter(received_at__lt=cutoff).order_by("received_at").values_list(
                "id", flat=True)[: self.batch])
            counts["receipts"] += receipts.filter(id__in=pks).delete()[0] if pks else 0
            counts["batches"] += 1
            if len(pks) < self.batch:
                break
        return counts


webhook_deliveries = WebhookDeliveries()


def deliveries_of(job_id: Any, limit: int = 50) -> list[dict[str, Any]]:
    """The ledger rows of one job (``ModelLedger``'s table), oldest attempt first, JSON-ready."""
    rows = WebhookDelivery.objects.using(get_settings().DATABASE).filter(job_id=job_id).order_by(
        "delivered_at", "id").values("attempt", "endpoint_id", "event_id", "topic", "status_code", "duration_ms",
                                     "error_code", "delivered_at")[:limit]
    return [{**row, "delivered_at": row["delivered_at"].isoformat().replace("+00:00", "Z")} for row in rows]
