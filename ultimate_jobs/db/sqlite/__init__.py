"""Internal: the SQLite store: the same operations as ``db/postgres.py`` for one writer.

SQLite has no server clock shared by processes, no ``SKIP LOCKED`` and no ``LISTEN``: time is
the process clock (frozen in tests), a claim is one ``UPDATE ... WHERE id IN (SELECT ... LIMIT)``
(SQLite runs one writer at a time, so no two workers can claim one row), and workers poll.
Values are stored the way Django's SQLite backend stores them: UUIDs as 32 hex digits,
timestamps as naive UTC text, JSON as text.

One module per entity, each holding its statements beside the methods of the same name: ``jobs``,
``leases`` (slots and the leader lease), ``counters``, ``outbox``, ``runs`` (steps and events), over
``connection`` (and its value conversions); ``SqliteStore`` assembles them.
"""

from __future__ import annotations

from ultimate_jobs.db.sqlite.connection import SqliteConnection, ts
from ultimate_jobs.db.sqlite.counters import CounterStatements
from ultimate_jobs.db.sqlite.jobs import JobStatements
from ultimate_jobs.db.sqlite.outbox import OutboxStatements
from ultimate_jobs.db.sqlite.runs import RunStatements
from ultimate_jobs.db.sqlite.slots import LeaseStatements
from ultimate_jobs.db.sqlite.views import ViewStatements

__all__ = ["SqliteStore", "ts"]


class SqliteStore(JobStatements, LeaseStatements, CounterStatements, OutboxStatements, RunStatements,
                  ViewStatements, SqliteConnection):
    """The store over a Django SQLite connection alias: the ``Store`` protocol, one mixin per entity
    over ``SqliteConnection``."""
