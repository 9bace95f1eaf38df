"""``QUEUE_DATABASES`` refusals: a bad shape fails the settings (``ultimate_jobs.E001``), a route
to an alias missing from ``DATABASES`` or not PostgreSQL fails ``manage.py check``
(``ultimate_jobs.E012``) and refuses an enqueue before anything is written; a ``Worker`` given
queues on several databases is refused."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError, SystemCheckError

from tests.app.jobs import noop
from tests.settings import BACKEND
from ultimate_jobs.checks import check_settings
from ultimate_jobs.errors import X_CONFIG_INVALID, JobsError
from ultimate_jobs.models import Job, OutboxEntry
from ultimate_jobs.runtime.worker import Worker


def _route(settings: Any, routes: object) -> None:
    settings.ULTIMATE_JOBS = {**settings.ULTIMATE_JOBS, "QUEUE_DATABASES": routes}


@pytest.mark.parametrize(("routes", "named"), [
    (["emails"], "must be a dict of queue name -> database alias"),
    ({"Bad Queue": "jobs_emails"}, "routes 'Bad Queue', which is not a valid queue name"),
    ({"emails": ""}, "['emails']='' must be a database alias"),
    ({"emails": 7}, "['emails']=7 must be a database alias"),
])
def test_a_bad_shape_fails_the_check_naming_the_setting(settings, routes, named) -> None:
    _route(settings, routes)
    [error] = check_settings()
    assert error.id == "ultimate_jobs.E001"
    assert "QUEUE_DATABASES" in error.msg and named in error.msg
    assert error.hint and "\n" not in error.hint


@pytest.mark.django_db(databases="__all__")  # Django 6's system checks read every configured database
def test_a_route_to_an_alias_missing_from_databases_fails_the_check_and_refuses_the_enqueue(settings) -> None:
    _route(settings, {"emails": "jobs_nowhere"})
    [error] = check_settings()
    assert error.id == "ultimate_jobs.E012"
    assert error.msg == ("ULTIMATE_JOBS['QUEUE_DATABASES'] routes queue 'emails' to 'jobs_nowhere', which is not "
                         "in DATABASES.")
    assert error.hint == ("Add 'jobs_nowhere' to DATABASES (then manage.py migrate --database jobs_nowhere), or "
                          "remove the route.")
    with pytest.raises(JobsError) as refused:
        noop.using(queue="emails").enqueue(key="never-written")
    assert refused.value.code == X_CONFIG_INVALID and "jobs_nowhere" in refused.value.cause
    assert not Job.objects.exists() and not OutboxEntry.objects.exists()
    with pytest.raises(SystemCheckError, match="ultimate_jobs.E012"):
        call_command("jobs_worker", "--burst", "--queues", "emails", skip_checks=False)
    for command in ("jobs_worker", "jobs_relay"):  # checks skipped: the command refuses by itself
        with pytest.raises(CommandError, match="'jobs_nowhere', which is not in DATABASES"):
            call_command(command, "--burst")


@pytest.mark.postgres_only
@pytest.mark.django_db
def test_a_route_to_a_sqlite_alias_fails_the_check(settings) -> None:
    assert BACKEND == "postgres"
    _route(settings, {"emails": "sqlite"})  # the store-contract suite's SQLite alias
    [error] = check_settings()
    assert error.id == "ultimate_jobs.E012"
    assert error.msg.endswith("routes queue 'emails' to 'sqlite', which is sqlite; a routed queue needs its own "
                              "PostgreSQL.")
    assert error.hint == "Point 'sqlite' at a PostgreSQL database, or remove the route."


def test_a_route_to_the_jobs_database_itself_is_let_be(settings) -> None:
    _route(settings, {"emails": "default"})
    assert check_settings() == []


@pytest.mark.postgres_only
def test_a_worker_given_queues_on_two_databases_is_refused(settings, make_worker) -> None:
    _route(settings, {"emails": "jobs_routed"})
    with pytest.raises(JobsError) as refused:
        Worker(queues=["default", "emails"])
    assert refused.value.code == X_CONFIG_INVALID
    assert refused.value.cause == ("The queues live on several databases (default on 'default'; emails on "
                                   "'jobs_routed'); one Worker claims from one.")
    assert make_worker(queues=["emails"]).alias == "jobs_routed"
