"""unit/ has no database at all: what needs one belongs in tests/integration/ or tests/store_contract/.

Enforced twice. At collection, a test here that asks for a database (a ``django_db`` mark at any
level, or a fixture whose closure reaches pytest-django's database fixtures: ``db``,
``transactional_db``, ``live_server``, ``admin_client``, ...) stops the run with a usage error
naming it, before any test runs and whatever ``-k``/``--deselect`` says. While a test runs, a
connection opened or a query sent on any alias (through ``request.getfixturevalue("db")``, a
``django_db_blocker.unblock()``, another thread) fails that test at teardown, naming the alias
and the statement.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from django.db import connections
from django.db.backends.signals import connection_created

HERE = Path(__file__).resolve().parent
# pytest-django's fixtures that set up or open the test database; every other database fixture
# (admin_user, admin_client, django_user_model, ...) depends on one of them.
DATABASE_FIXTURES = frozenset({"db", "transactional_db", "django_db_reset_sequences", "django_db_serialized_rollback",
                               "_django_db_helper", "django_db_setup", "live_server"})


def database_wanted(item: pytest.Item) -> list[str]:
    """Why ``item`` asks for a database: its ``django_db`` mark and the database fixtures it reaches."""
    reasons = ["the django_db mark"] if item.get_closest_marker("django_db") else []
    reached = sorted(name for name in DATABASE_FIXTURES & set(getattr(item, "fixturenames", ())) if name[0] != "_")
    return reasons + ([f"the fixtures {', '.join(reached)}"] if reached else [])


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # A conftest's collection hook sees every item of the session: judge only this directory's.
    offenders = [f"  {item.nodeid}: {', '.join(reasons)}" for item in items
                 if item.path.is_relative_to(HERE) and (reasons := database_wanted(item))]
    if offenders:
        raise pytest.UsageError("tests/unit/ has no database; move these to tests/integration/ (or drop what "
                                "asks for one):\n" + "\n".join(offenders))


@pytest.fixture(autouse=True)
def _no_database() -> Iterator[None]:
    """Fail the test when it opened a database connection or sent a statement on any alias."""
    used: list[str] = []

    def opened(sender: Any, connection: Any, **kwargs: Any) -> None:
        used.append(f"{connection.alias}: a connection opened")

    def sent(execute: Any, sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
        used.append(f"{context['connection'].alias}: {sql}")
        return execute(sql, params, many, context)

    connection_created.connect(opened)
    try:
        with ExitStack() as stack:
            for connection in connections.all():
                stack.enter_context(connection.execute_wrapper(sent))
            yield
    finally:
        connection_created.disconnect(opened)
    if used:
        pytest.fail("tests/unit/ has no database, and this test used one:\n  " + "\n  ".join(used[:5]), pytrace=False)
