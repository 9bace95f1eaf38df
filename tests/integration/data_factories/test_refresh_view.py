"""``refresh_view()``: REFRESH MATERIALIZED VIEW [CONCURRENTLY] in one step (PostgreSQL), the
refusals by ``manage.py check`` and the first run, and the refusal at declaration on SQLite."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connection

from tests.app.models import Hit
from tests.error_codes import refused
from ultimate_jobs import refresh_view
from ultimate_jobs.testing import run_job

pytestmark = pytest.mark.django_db(transaction=True)


def sql(statement: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement)


def totals() -> dict[str, int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT org, total FROM hit_totals ORDER BY org")
        return dict(cursor.fetchall())


@pytest.fixture
def views():
    sql("CREATE MATERIALIZED VIEW hit_totals AS SELECT org, count(*) AS total FROM testapp_hit GROUP BY org")
    sql("CREATE MATERIALIZED VIEW hit_totals_bare AS SELECT org FROM testapp_hit")
    sql("CREATE UNIQUE INDEX hit_totals_org ON hit_totals (org)")
    sql("CREATE VIEW hit_plain AS SELECT org FROM testapp_hit")
    yield
    sql("DROP VIEW IF EXISTS hit_plain")
    sql("DROP MATERIALIZED VIEW IF EXISTS hit_totals_bare")
    sql("DROP MATERIALIZED VIEW IF EXISTS hit_totals")


def add_hits(org: str, n: int) -> None:
    from django.utils import timezone
    Hit.objects.bulk_create([Hit(org=org, at=timezone.now()) for _ in range(n)])


@pytest.mark.postgres_only
@pytest.mark.parametrize("concurrently", [False, True])
def test_a_run_refreshes_the_view_in_one_step(track, views, concurrently) -> None:
    add_hits("acme", 3)
    handle = track(refresh_view(name="rv.totals", view="hit_totals", concurrently=concurrently))
    assert totals() == {}  # created before the rows: stale until refreshed

    trace = run_job(handle)

    assert trace.state == "done" and trace.result == {"view": "hit_totals", "concurrently": concurrently}
    assert list(trace.steps) == ["refresh"]
    assert totals() == {"acme": 3}
    add_hits("beta", 2)
    run_job(handle)
    assert totals() == {"acme": 3, "beta": 2}


@pytest.mark.postgres_only
@pytest.mark.parametrize(("view", "concurrently"), [("hit_plain", False), ("testapp_hit", False),
                                                    ("hit_totals_bare", True), ("no_such_view", False)])
def test_what_is_not_a_refreshable_matview_fails_the_first_run_and_the_check(track, views, view, concurrently) -> None:
    handle = track(refresh_view(name="rv.bad", view=view, concurrently=concurrently))

    trace = run_job(handle)

    assert trace.state == "dead" and trace.error_code == "X_JOB_REFRESH_VIEW_INVALID"
    if view == "no_such_view":
        call_command("check", "--database", "default")  # a warning only: a pending migration may create it
        return
    with pytest.raises(SystemCheckError, match="ultimate_jobs.E011") as err:
        call_command("check", "--database", "default")
    assert "X_JOB_REFRESH_VIEW_INVALID" in str(err.value)


@pytest.mark.postgres_only
def test_a_good_declaration_passes_the_check(track, views) -> None:
    track(refresh_view(name="rv.good", view="hit_totals", concurrently=True))
    call_command("check", "--database", "default")


def test_on_sqlite_the_declaration_is_refused(track, settings) -> None:
    alias = "sqlite" if connection.vendor == "postgresql" else "default"
    if alias not in settings.DATABASES:
        pytest.skip("no SQLite alias configured")
    with refused("X_JOB_REFRESH_VIEW_INVALID"):
        track(refresh_view(name="rv.sqlite", view="hit_totals", database=alias))


@pytest.mark.parametrize("options", [{"view": 42}, {"view": ""}, {"view": "x", "concurrently": "yes"},
                                     {"view": "x", "database": "nope"}])
def test_bad_declarations_are_refused(track, options) -> None:
    with refused("X_JOB_REFRESH_VIEW_INVALID"):
        track(refresh_view(name="rv.invalid", **options))
