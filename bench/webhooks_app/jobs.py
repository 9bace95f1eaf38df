"""The benchmark's webhook: the receiver's URL rides in the input, so every worker reads the same
endpoint without a table; the event body is a small JSON object."""

from ultimate_jobs import NO_TENANT, Retry, webhook
from ultimate_jobs.webhooks import ModelLedger

deliver = webhook(
    name="bench.webhooks.deliver", tenant=NO_TENANT,
    endpoint=lambda endpoint_id, url, **_: {"id": endpoint_id, "url": url, "secret": "bench-secret"},
    event=lambda event_id, **_: {"id": event_id, "topic": "bench.event", "body": {"event": event_id}},
    ledger=ModelLedger(), allow_private=True, timeout="10s", retry=Retry(attempts=3, delay="100ms"))
