"""Internal: the PostgreSQL store: every raw statement ultimate_jobs sends to PostgreSQL.

Raw SQL only where the ORM cannot say it: the claim CTE with ``FOR UPDATE SKIP LOCKED``,
``ON CONFLICT`` on the live-key index expression, batched settles over ``unnest`` arrays,
``LISTEN/NOTIFY``, the scheduler lease upsert and the batched retention purge. Each constant
carries its method's name. Every deadline is computed from ``coalesce(%(now)s, now())``: NULL
in production, so the database clock decides. Arrays are sent in binary (``%(name)b``): no text
quoting of thousands of elements.

One module per entity, each holding its statements beside the methods of the same name: ``inserts``
(an enqueue: INSERT, or COPY for a large batch), ``jobs``,
``leases`` (slots and the leader lease), ``counters``, ``outbox``, ``runs`` (steps and events), over
``connection``; ``PostgresStore`` assembles them. The constants are re-exported here.
"""

from __future__ import annotations

from ultimate_jobs.db.postgres.connection import PostgresConnection
from ultimate_jobs.db.postgres.counters import (
    COUNTER_ADD,
    COUNTER_FOLD,
    CounterStatements,
)
from ultimate_jobs.db.postgres.inserts import (
    JOB_COPY,
    JOB_COPY_LOOKUP,
    JOB_INSERT_MANY,
    JOB_INSERT_ONE,
    JOB_LIVE_BY_KEY,
)
from ultimate_jobs.db.postgres.jobs import (
    JOB_CLAIM,
    JOB_HEARTBEAT,
    JOB_PURGE_FINISHED,
    JOB_RELEASE_UNHELD,
    JOB_RESCUE,
    JOB_SETTLE_MANY,
    QUEUE_WAKE,
    JobStatements,
)
from ultimate_jobs.db.postgres.outbox import (
    OUTBOX_CLAIM,
    OUTBOX_MARK_PUBLISHED,
    OUTBOX_PURGE,
    OUTBOX_RELEASE,
    OUTBOX_STAGE_MANY,
    OUTBOX_STAGE_ONE,
    OutboxStatements,
)
from ultimate_jobs.db.postgres.runs import (
    EVENT_FIND,
    EVENT_PUBLISH,
    EVENT_PURGE,
    JOB_PROGRESS,
    JOB_WAKE_WAITER,
    STEP_BEGIN,
    STEP_COMPLETE,
    STEP_FAIL,
    STEP_LIST,
    RunStatements,
)
from ultimate_jobs.db.postgres.slots import (
    LEADER_ATTEMPT_ELECT,
    LEADER_RESIGN,
    LEASE_ACQUIRE,
    LEASE_RELEASE,
    LEASE_RENEW,
    LeaseStatements,
)
from ultimate_jobs.db.postgres.views import ViewStatements
from ultimate_jobs.db.sessions import ONLY_WHEN_ASKED
from ultimate_jobs.db.store import JOBS_CHANNEL, OUTBOX_CHANNEL

__all__ = [
    "COUNTER_ADD", "COUNTER_FOLD", "EVENT_FIND", "EVENT_PUBLISH", "EVENT_PURGE", "JOBS_CHANNEL", "JOB_CLAIM",
    "JOB_COPY", "JOB_COPY_LOOKUP", "JOB_HEARTBEAT", "JOB_INSERT_MANY", "JOB_INSERT_ONE", "JOB_LIVE_BY_KEY",
    "JOB_PROGRESS", "JOB_PURGE_FINISHED", "JOB_RELEASE_UNHELD", "JOB_RESCUE", "JOB_SETTLE_MANY", "JOB_WAKE_WAITER",
    "LEADER_ATTEMPT_ELECT", "LEADER_RESIGN", "LEASE_ACQUIRE", "LEASE_RELEASE", "LEASE_RENEW", "ONLY_WHEN_ASKED",
    "OUTBOX_CHANNEL", "OUTBOX_CLAIM", "OUTBOX_MARK_PUBLISHED", "OUTBOX_PURGE", "OUTBOX_RELEASE",
    "OUTBOX_STAGE_MANY", "OUTBOX_STAGE_ONE", "PostgresStore", "QUEUE_WAKE", "STEP_BEGIN", "STEP_COMPLETE",
    "STEP_FAIL", "STEP_LIST",
]


class PostgresStore(JobStatements, LeaseStatements, CounterStatements, OutboxStatements, RunStatements,
                    ViewStatements, PostgresConnection):
    """The store over a Django PostgreSQL connection alias: the ``Store`` protocol, one mixin per
    entity (each module holds its statements beside its methods), over ``PostgresConnection``."""
