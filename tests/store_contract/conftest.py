"""The ``store`` fixture: each contract test runs once per database, in one test run.

The parameters are the backends; each carries its own ``django_db`` mark naming only its alias,
so pytest-django sets up (and a test rolls back) that database alone. A backend with no alias
(PostgreSQL unreachable while the suite runs on SQLite) is skipped with a banner, or fails the
run under ``REQUIRE_POSTGRES=1``.
"""

from __future__ import annotations

import os

import pytest
from django.conf import settings

from ultimate_jobs.db import Store, store_for

BACKENDS = ("postgres", "sqlite")
MISSING = ("PostgreSQL is not reachable: the store contract ran on SQLite only. Set DATABASE_URL or start "
           "PostgreSQL; REQUIRE_POSTGRES=1 makes this an error.")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "commits: the contract test needs real commits (transaction=True)")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "store" not in metafunc.fixturenames:
        return
    commits = metafunc.definition.get_closest_marker("commits") is not None
    params = []
    for backend in BACKENDS:
        alias = settings.CONTRACT_ALIASES.get(backend)
        if alias is None:
            params.append(pytest.param(None, id=backend))
        else:
            params.append(pytest.param(alias, id=backend,
                                       marks=pytest.mark.django_db(databases=[alias], transaction=commits)))
    metafunc.parametrize("store_alias", params)


@pytest.fixture
def store(store_alias: str | None) -> Store:
    if store_alias is None:
        if os.environ.get("REQUIRE_POSTGRES") == "1":
            pytest.fail(MISSING)
        pytest.skip(MISSING)
    return store_for(store_alias)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    skipped = terminalreporter.stats.get("skipped", [])
    if any("store_contract" in str(getattr(report, "nodeid", "")) and "[postgres]" in report.nodeid
           for report in skipped):
        terminalreporter.write_line("!" * 78 + "\n!! " + MISSING + "\n" + "!" * 78, red=True, bold=True)
