"""Internal: materialized views on PostgreSQL: what a relation is, and its refresh."""

from __future__ import annotations

from typing import LiteralString

from ultimate_jobs.db.postgres.connection import PostgresConnection
from ultimate_jobs.db.store import ViewFacts

VIEW_DESCRIBE: LiteralString = """
-- What the relation named (resolved on the search_path, like any unqualified name) is: 'm' is a
-- materialized view. CONCURRENTLY needs a unique index with no predicate and no expression.
SELECT c.relkind::text AS kind, n.nspname AS schema, c.relname AS name,
       EXISTS (SELECT 1 FROM pg_index AS i
                WHERE i.indrelid = c.oid AND i.indisunique AND i.indpred IS NULL AND i.indexprs IS NULL) AS uniq
  FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
 WHERE c.oid = to_regclass(%(name)s)
"""

_KINDS = {"m": "matview", "r": "table", "p": "table", "v": "view"}


class ViewStatements(PostgresConnection):
    """``view_describe`` and ``view_refresh``."""

    def view_describe(self, *, name: str) -> ViewFacts:
        with self._cursor() as cursor:
            cursor.execute(VIEW_DESCRIBE, {"name": name})
            row = cursor.fetchone()
        if row is None:
            return ViewFacts(kind=None, unique_index=False, qualified=None)
        kind, schema, relname, unique = row
        return ViewFacts(kind=_KINDS.get(kind, "other"), unique_index=bool(unique), qualified=(schema, relname))

    def view_refresh(self, *, name: tuple[str, str], concurrently: bool) -> None:
        from psycopg import sql

        statement = sql.SQL("REFRESH MATERIALIZED VIEW {}{}").format(
            sql.SQL("CONCURRENTLY ") if concurrently else sql.SQL(""), sql.Identifier(*name))
        with self._cursor() as cursor:
            cursor.execute(statement)
