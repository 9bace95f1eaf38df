"""A webhook declared in the test process and in worker processes (``JOBS_TEST_MODULES``): the
input carries the receiver's URL, so every process reads the same endpoint."""

from __future__ import annotations

from ultimate_jobs import NO_TENANT, JobContext, Retry, job, webhook
from ultimate_jobs.webhooks import ModelLedger

SECRET = "whsec-process"

deliver = webhook(
    name="tests.webhooks.process", tenant=NO_TENANT,
    endpoint=lambda endpoint_id, url, **_: {"id": endpoint_id, "url": url, "secret": SECRET},
    event=lambda event_id, **_: {"id": event_id, "topic": "order.paid", "body": {"order": event_id}},
    ledger=ModelLedger(), allow_private=True, timeout="20s", retry=Retry(attempts=5, delay="100ms", jitter=False))

# The slow-endpoint probe: a short timeout, one attempt, so a delivery the endpoint stalls ends at
# once as a failure; and an unrelated job that must still find a free slot.
slow_deliver = webhook(
    name="tests.webhooks.slow", tenant=NO_TENANT,
    endpoint=lambda endpoint_id, url, **_: {"id": endpoint_id, "url": url, "secret": SECRET},
    event=lambda event_id, **_: {"id": event_id, "topic": "order.paid", "body": {"order": event_id}},
    ledger=ModelLedger(), allow_private=True, timeout="3s", retry=Retry(attempts=1))


@job(idempotency_key="unrelated:{n}", tenant=NO_TENANT, name="tests.webhooks.unrelated")
def unrelated(ctx: JobContext, n: int) -> dict[str, int]:
    return {"n": n}
