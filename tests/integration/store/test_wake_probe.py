"""The wake probe, in-process on PostgreSQL: a listener whose LISTEN is on another database than the
one its probe NOTIFY goes through hears nothing — ``jobs.wake.unverified`` naming the alias and
``LISTEN_DATABASES``, ``verified`` False — and once the probe travels where it listens it logs
``jobs.wake.live``; stopped, it leaves no LISTEN behind. ``jobs doctor``'s ``wake`` check fails the
same way for a ``LISTEN_DATABASES`` entry pointing at another database."""

from __future__ import annotations

import logging

import pytest

from tests.support.routing import ROUTED, raw
from ultimate_jobs import ops
from ultimate_jobs.db.listen import Listener, wait_until

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db(databases=["default", ROUTED], transaction=True)]

LISTENERS = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %%'"


def test_an_unheard_probe_is_unverified_and_a_heard_one_is_live_again(caplog) -> None:
    caplog.set_level(logging.INFO, logger="ultimate_jobs")
    woken: list[str] = []
    listener = Listener("default", [], woken.append, listen_alias=ROUTED, probe_interval=1.0)
    listener.start()
    try:
        assert wait_until(lambda: listener.verified is False, timeout=10)
        assert listener.unverified
        [line] = [r.getMessage() for r in caplog.records if "jobs.wake.unverified" in r.getMessage()]
        assert f"alias=default listen_alias={ROUTED}" in line and "LISTEN_DATABASES" in line
        listener.alias = ROUTED  # the probe now goes through the database the LISTEN is on
        assert wait_until(lambda: listener.verified is True, timeout=10)
        assert any("jobs.wake.live" in r.getMessage() for r in caplog.records)
        assert raw(ROUTED, LISTENERS) == [(1,)]
    finally:
        listener.stop()
    assert not listener.connected.is_set()
    assert wait_until(lambda: raw(ROUTED, LISTENERS) == [(0,)], timeout=5)


def test_the_doctors_wake_check_fails_for_a_listen_alias_on_another_database(settings) -> None:
    settings.ULTIMATE_JOBS = {**settings.ULTIMATE_JOBS, "LISTEN_DATABASES": {"default": ROUTED}}
    checks = {c["name"]: c for c in ops.doctor()["checks"]}
    assert checks["wake"]["status"] == "failed" and checks["wake"]["ids"] == ["default"]
    assert f"on a LISTEN over {ROUTED!r}" in checks["wake"]["detail"]
    assert "LISTEN_DATABASES" in checks["wake"]["detail"]
    settings.ULTIMATE_JOBS = {**settings.ULTIMATE_JOBS, "LISTEN_DATABASES": {}}
    assert {c["name"]: c for c in ops.doctor()["checks"]}["wake"]["status"] == "ok"
