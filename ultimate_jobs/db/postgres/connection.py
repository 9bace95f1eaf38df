"""Internal: the PostgreSQL store's connection: psycopg cursors on Django's connection, prepared
statements, and the LISTEN session."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ultimate_jobs.conf import get_settings
from ultimate_jobs.db.listen import Listener
from ultimate_jobs.db.routing import listen_alias
from ultimate_jobs.db.sessions import ONLY_WHEN_ASKED


class PostgresConnection:
    """What every statement of the PostgreSQL store runs on: a Django connection alias.

    Statements go through a psycopg ``Cursor`` on the Django connection itself (same session,
    same transaction, so an enqueue inside ``atomic()`` commits or rolls back with the caller):
    server-side binding sends parameters (and the arrays of a batch) in binary, which Django's
    default client-side cursor does not. Errors are re-raised as Django's.

    The hot statements (enqueue, claim, settle, heartbeat) are prepared on each connection:
    planned once instead of on every call (what that gains: docs/reference/settings.md).
    Django's own connection never prepares, so the store asks per statement — unless the
    database's ``OPTIONS`` name ``prepare_threshold`` themselves, which hands the decision back
    to psycopg: ``"prepare_threshold": None`` turns it off (PgBouncer before 1.21 in transaction
    mode cannot keep a prepared statement across transactions).
    """

    supports_listen_notify = True

    def __init__(self, alias: str) -> None:
        from django.db import connections

        self.alias = alias
        self._connections = connections

    def _prepare(self) -> bool | None:
        """``prepare=`` for a hot statement: True, or None when OPTIONS decide (see the class)."""
        options = self._connections[self.alias].settings_dict.get("OPTIONS") or {}
        return None if "prepare_threshold" in options else True

    def _connect(self, wrapper: Any) -> Any:
        """The open psycopg connection, able to prepare what the store asks to.

        psycopg prepares nothing, ``prepare=True`` included, while ``prepare_threshold`` is None,
        which is how Django opens it. A threshold no statement reaches by count leaves every
        other statement unprepared (Django's own cursors bind client-side and never prepare).
        """
        wrapper.ensure_connection()
        conn = wrapper.connection
        if conn.prepare_threshold is None and self._prepare():
            conn.prepare_threshold = ONLY_WHEN_ASKED
        return conn

    @contextlib.contextmanager
    def _cursor(self, row_factory: Any = None) -> Iterator[Any]:
        """A cursor on the Django connection; ``row_factory`` (e.g. ``kwargs_row(ClaimedJob)``) builds
        each answer row by column name."""
        import psycopg

        wrapper = self._connections[self.alias]
        with wrapper.wrap_database_errors:
            cursor = psycopg.Cursor(self._connect(wrapper), row_factory=row_factory) if row_factory else \
                psycopg.Cursor(self._connect(wrapper))
            with cursor:
                yield cursor

    def listen(self, *, channel: str, on_wake: Callable[[str], None], queues: Iterable[str] = ()) -> Listener:
        listener = Listener(self.alias, queues, on_wake, channel=channel, listen_alias=listen_alias(self.alias),
                            probe_interval=get_settings().WAKE_PROBE_INTERVAL)
        listener.start()
        return listener
