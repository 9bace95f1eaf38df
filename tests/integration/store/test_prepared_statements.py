"""The PostgreSQL store plans its hot statements once per connection (prepared), unless the
database's OPTIONS hand that decision to psycopg (``"prepare_threshold": None`` for PgBouncer)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection

from tests.app.jobs import noop
from ultimate_jobs.db import store_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres_only]


def prepared(fragment: str) -> int:
    """Statements prepared in this session (the store runs on the test's own connection)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements WHERE statement ILIKE %s", [f"%{fragment}%"])
        return cursor.fetchone()[0]


def enqueue_and_claim(key: str = "first") -> None:
    noop.enqueue(key=key)
    claimed = store_for().job_claim(queue="default", names=[noop.name], limit=5, worker_id="test", visibility=30,
                                    now=None)
    assert len(claimed) == 1


@pytest.fixture
def fresh_connection() -> Iterator[None]:
    connection.close()
    yield
    connection.close()


def test_the_claim_is_prepared_on_the_connection_that_runs_it(fresh_connection: None) -> None:
    enqueue_and_claim()
    assert prepared("SKIP LOCKED") == 1  # the claim
    assert prepared("INSERT INTO ultimate_jobs_job") == 1  # the enqueue
    enqueue_and_claim("second")
    assert prepared("SKIP LOCKED") == 1  # planned once, then reused
    assert prepared("pg_prepared_statements") == 0  # Django's own statements stay unprepared


def test_options_naming_prepare_threshold_turn_it_off(fresh_connection: None,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(connection.settings_dict, "OPTIONS", {**connection.settings_dict["OPTIONS"],
                                                             "prepare_threshold": None})
    enqueue_and_claim()
    assert prepared("SKIP LOCKED") == 0 and prepared("INSERT INTO ultimate_jobs_job") == 0
