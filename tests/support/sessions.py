"""A second PostgreSQL session on the test database, outside Django: what it sees is committed,
and what it holds (locks, LISTEN) is another session's."""

from __future__ import annotations

from typing import Any


def second_session(**kwargs: Any) -> Any:
    """``psycopg.connect`` with the test database's parameters; ``kwargs`` (e.g. ``autocommit=True``)
    pass through."""
    import psycopg
    from django.db import connection

    params = connection.get_connection_params()
    for key in ("cursor_factory", "context", "server_side_binding", "prepare_threshold"):
        params.pop(key, None)
    return psycopg.connect(**params, **kwargs)
