"""Webhooks, outbound and inbound: the public names in one place.

Usage::

    from ultimate_jobs.webhooks import ModelLedger, verify_webhook_signature, webhook, webhook_receiver

``webhook``, ``webhook_receiver`` and ``verify_webhook_signature`` are importable from
``ultimate_jobs`` too; ``ModelLedger`` (the ledger over the shipped ``WebhookDelivery`` table)
and ``limit_receiver_bodies`` (the ASGI body cap for receivers) live here. See ``docs/reference/webhooks.md``.
"""

from __future__ import annotations

from ultimate_jobs.factories.webhook.declaration import webhook
from ultimate_jobs.factories.webhook.ledger import Delivery, ModelLedger, WebhookLedger
from ultimate_jobs.factories.webhook.signing import verify_webhook_signature
from ultimate_jobs.factories.webhook_receiver import Inbound, limit_receiver_bodies, webhook_receiver

__all__ = ["Delivery", "Inbound", "ModelLedger", "WebhookLedger", "limit_receiver_bodies", "verify_webhook_signature",
           "webhook", "webhook_receiver"]
