"""The outbox: enqueues made inside a transaction, published by the relay after commit.

An enqueue inside ``transaction.atomic()`` writes an ``OutboxEntry`` on the caller's connection
(``ultimate_jobs.enqueue``), so the job exists exactly when the caller's transaction commits,
with no after-commit callback. ``Relay`` (``relay.py``, run by ``manage.py jobs_relay`` or
``jobs_worker --roles relay``) claims committed rows in batches, publishes them into the job
table with the enqueue's own dedupe rule, and marks them published.
"""

from ultimate_jobs.outbox.relay import Relay

__all__ = ["Relay"]
