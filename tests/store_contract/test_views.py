"""The materialized-view methods: PostgreSQL describes a relation and refreshes a view; SQLite,
which has no materialized views, refuses both."""

from __future__ import annotations

import pytest
from django.db import connections

from tests.store_contract import covers
from ultimate_jobs.db.store import Store, ViewFacts
from ultimate_jobs.errors import X_JOB_REFRESH_VIEW_INVALID, JobsError


def _sql(store: Store, statement: str) -> None:
    with connections[store.alias].cursor() as cursor:
        cursor.execute(statement)


def _rows(store: Store) -> list[tuple[str, int]]:
    with connections[store.alias].cursor() as cursor:
        cursor.execute("SELECT name, n FROM contract_mv ORDER BY name")
        return list(cursor.fetchall())


@covers("view_describe", "view_refresh")
def test_a_view_is_described_and_refreshed_on_postgres_and_refused_on_sqlite(store: Store) -> None:
    if connections[store.alias].vendor == "sqlite":
        for call in (lambda: store.view_describe(name="contract_mv"),
                     lambda: store.view_refresh(name=("main", "contract_mv"), concurrently=False)):
            with pytest.raises(JobsError) as err:
                call()
            assert err.value.code == X_JOB_REFRESH_VIEW_INVALID
        return
    _sql(store, "CREATE TABLE contract_src (name text)")
    _sql(store, "CREATE MATERIALIZED VIEW contract_mv AS SELECT name, count(*) AS n FROM contract_src GROUP BY name")
    assert store.view_describe(name="contract_mv") == ViewFacts("matview", False, ("public", "contract_mv"))
    assert store.view_describe(name="contract_src") == ViewFacts("table", False, ("public", "contract_src"))
    assert store.view_describe(name="no_such_relation") == ViewFacts(None, False, None)
    _sql(store, "CREATE UNIQUE INDEX contract_mv_name ON contract_mv (name)")
    assert store.view_describe(name="public.contract_mv").unique_index is True

    _sql(store, "INSERT INTO contract_src VALUES ('a'), ('a'), ('b')")
    assert _rows(store) == []
    store.view_refresh(name=("public", "contract_mv"), concurrently=False)
    assert _rows(store) == [("a", 2), ("b", 1)]
    _sql(store, "INSERT INTO contract_src VALUES ('c')")
    store.view_refresh(name=("public", "contract_mv"), concurrently=True)
    assert _rows(store) == [("a", 2), ("b", 1), ("c", 1)]
