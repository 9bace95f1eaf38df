"""``db.release_broken_connections``: what a service loop runs after a failed pass. A connection
the server dropped (``pg_terminate_backend``, as a restart or a failover would) answers every use
with an error until it is closed; once released, the next use dials afresh. A healthy connection
is kept."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import OperationalError, connection, connections

from ultimate_jobs.db import release_broken_connections

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db(transaction=True)]


def backend_pid() -> int:
    """This thread's session on ``default``."""
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def terminate(pid: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])


def test_a_dropped_connection_is_closed_and_the_next_use_dials_afresh() -> None:
    results: dict[str, Any] = {}
    cut, resumed, finished = threading.Event(), threading.Event(), threading.Event()

    def role() -> None:  # a role's thread: its own Django connection, kept across passes
        results["first"] = backend_pid()
        cut.set()
        resumed.wait(10)
        try:
            backend_pid()
        except OperationalError as exc:
            results["failed"] = str(exc)
        try:
            backend_pid()  # without a release, Django keeps handing out the dead session
        except OperationalError as exc:
            results["still_failed"] = str(exc)
        release_broken_connections()
        results["after"] = backend_pid()
        kept = connections["default"].connection
        release_broken_connections()  # a healthy connection is left open
        results["kept"] = connections["default"].connection is kept and kept is not None
        connections.close_all()
        finished.set()

    thread = threading.Thread(target=role)
    thread.start()
    assert cut.wait(10)
    terminate(results["first"])
    resumed.set()
    assert finished.wait(20)
    thread.join(5)
    assert "terminating connection" in results["failed"] or "closed" in results["failed"]
    assert "closed" in results["still_failed"]
    assert isinstance(results["after"], int) and results["after"] != results["first"]
    assert results["kept"] is True
