"""``QUEUE_DATABASES`` against a second PostgreSQL database: the ``jobs_routed`` alias of
tests/settings.py (a test database of its own), with the queue ``emails`` routed to it."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connections

ROUTED = "jobs_routed"
ROUTES = {"emails": ROUTED}


@pytest.fixture
def routed(settings: Any) -> Iterator[None]:
    """Route the queue ``emails`` to ``jobs_routed`` for this test."""
    settings.ULTIMATE_JOBS = {**settings.ULTIMATE_JOBS, "QUEUE_DATABASES": dict(ROUTES)}
    yield


@pytest.fixture
def routed_env() -> dict[str, str]:
    """What a worker process needs to join both test databases and route ``emails`` as this test does."""
    return {"JOBS_TEST_ROUTED_NAME": str(connections[ROUTED].settings_dict["NAME"]),
            "JOBS_TEST_QUEUE_DATABASES": ",".join(f"{q}={a}" for q, a in ROUTES.items())}


def raw(alias: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """A raw query on ``alias``: what is really stored there, read past every layer of ours."""
    with connections[alias].cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall()) if cursor.description else []


Raw = Callable[[str, str], list[tuple[Any, ...]]]
PROCESS_TIMEOUT = float(os.environ.get("JOBS_TEST_PROCESS_TIMEOUT", "60"))
