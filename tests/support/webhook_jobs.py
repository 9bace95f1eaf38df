"""A webhook declared in the test process and in worker processes (``JOBS_TEST_MODULES``): the
input carries the receiver's URL, so every process reads the same endpoint."""

from __future__ import annotations

from ultimate_jobs import NO_TENANT, Retry, webhook
from ultimate_jobs.webhooks import ModelLedger

SECRET = "whsec-process"

deliver = webhook(
    name="tests.webhooks.process", tenant=NO_TENANT,
    endpoint=lambda endpoint_id, url, **_: {"id": endpoint_id, "url": url, "secret": SECRET},
    event=lambda event_id, **_: {"id": event_id, "topic": "order.paid", "body": {"order": event_id}},
    ledger=ModelLedger(), allow_private=True, timeout="20s", retry=Retry(attempts=5, delay="100ms", jitter=False))
