"""Internal: pick the store for a database alias (PostgreSQL or SQLite)."""

from __future__ import annotations

from django.db import connections

from ultimate_jobs.conf import get_settings
from ultimate_jobs.db.store import (
    JOBS_CHANNEL,
    OUTBOX_CHANNEL,
    ClaimedJob,
    Inserted,
    JobRow,
    LeaderLease,
    Purged,
    Rescued,
    SettledAndClaimed,
    Settlement,
    StepRow,
    StepWrite,
    Store,
)
from ultimate_jobs.errors import X_CONFIG_INVALID, JobsError

__all__ = ["JOBS_CHANNEL", "OUTBOX_CHANNEL", "ClaimedJob", "Inserted", "JobRow", "LeaderLease", "Purged", "Rescued",
           "SettledAndClaimed", "Settlement", "StepRow", "StepWrite", "Store", "close_connection",
           "release_broken_connections", "store_for"]

_stores: dict[str, Store] = {}


def store_for(alias: str | None = None) -> Store:
    """The store for ``alias`` (default: the ``DATABASE`` setting). Each store module is imported
    on first use, so a SQLite-only project never loads the PostgreSQL one."""
    alias = alias or get_settings().DATABASE
    store = _stores.get(alias)
    if store is None:
        vendor = connections[alias].vendor
        if vendor == "postgresql":
            from ultimate_jobs.db.postgres import PostgresStore

            store = PostgresStore(alias)
        elif vendor == "sqlite":
            from ultimate_jobs.db.sqlite import SqliteStore

            store = SqliteStore(alias)
        else:
            raise JobsError(X_CONFIG_INVALID, f"The jobs database {alias!r} is {vendor}; ultimate_jobs runs on "
                            "PostgreSQL or SQLite.", "Point ULTIMATE_JOBS['DATABASE'] at a PostgreSQL alias.")
        _stores[alias] = store
    return store


def close_connection(alias: str) -> None:
    """Close this thread's connection to ``alias``: a worker, relay or scheduler thread's connection
    dies with the thread. A connection that is already broken may fail to close; the next use re-dials."""
    try:
        connections[alias].close()
    except Exception:  # closing is best effort: the next use re-dials
        pass


def release_broken_connections() -> None:
    """Close this thread's connections, to any alias, that a failure left unusable.

    Django re-dials a connection it closed, never one the server dropped under it (a restart, a
    failover, ``pg_terminate_backend``): that one answers "the connection is closed" to every use
    until someone closes it. A service loop calls this after a failed pass, so whatever database
    the pass touched (its own, or one ``QUEUE_DATABASES`` routes a publish to) is dialled afresh
    on the next pass once the server answers. A connection psycopg already knows is broken is
    closed without a round trip; one that saw an error is pinged first (Django's ``is_usable``).
    """
    for conn in connections.all(initialized_only=True):
        raw = conn.connection
        if raw is None or conn.in_atomic_block:
            continue
        try:
            if getattr(raw, "closed", False) or (conn.errors_occurred and not conn.is_usable()):
                conn.close()
            else:
                conn.errors_occurred = False
        except Exception:  # closing is best effort: a connection that cannot close is dropped below
            conn.connection = None
