"""``LISTEN_DATABASES`` and ``WAKE_PROBE_INTERVAL`` are validated by ``manage.py check``: a bad shape
or a probe interval under 1s fails the settings (``ultimate_jobs.E001``), an entry naming an alias
that is not a jobs database or not in ``DATABASES`` fails ``ultimate_jobs.E013``. And a pooler's
prepared-statement error, however it is wrapped, is classified ``X_DB_PREPARED_STATEMENTS``."""

from __future__ import annotations

import pytest
from django.db import ProgrammingError
from django.test import override_settings

from tests.settings import BACKEND
from ultimate_jobs.checks import check_settings
from ultimate_jobs.conf import get_settings
from ultimate_jobs.errors import CODES, X_CONFIG_INVALID, X_DB_PREPARED_STATEMENTS, JobsError, db_error_code


def _check(**jobs: object) -> list:
    with override_settings(ULTIMATE_JOBS=jobs):
        return check_settings()


@pytest.mark.parametrize(("value", "named"), [
    (["direct"], "must be a dict of jobs alias -> the alias its LISTEN uses"),
    ({"default": ""}, "maps 'default' to ''; both must be database aliases"),
    ({"default": 7}, "maps 'default' to 7; both must be database aliases"),
])
def test_a_bad_shape_fails_the_settings_check(value: object, named: str) -> None:
    [error] = _check(LISTEN_DATABASES=value)
    assert error.id == "ultimate_jobs.E001"
    assert "LISTEN_DATABASES" in error.msg and named in error.msg
    with override_settings(ULTIMATE_JOBS={"LISTEN_DATABASES": value}), pytest.raises(JobsError) as refused:
        get_settings()
    assert refused.value.code == X_CONFIG_INVALID


def test_a_listen_alias_missing_from_databases_fails_the_check_naming_it() -> None:
    [error] = _check(LISTEN_DATABASES={"default": "nowhere_direct"})
    assert error.id == "ultimate_jobs.E013"
    assert error.msg == "ULTIMATE_JOBS['LISTEN_DATABASES']['default']='nowhere_direct', which is not in DATABASES."
    assert "Add 'nowhere_direct' to DATABASES" in (error.hint or "")


def test_an_entry_for_an_alias_that_holds_no_jobs_fails_the_check() -> None:
    [error] = _check(LISTEN_DATABASES={"elsewhere": "default"})
    assert error.id == "ultimate_jobs.E013"
    assert "'elsewhere' is not a jobs database" in error.msg


@pytest.mark.skipif(BACKEND != "postgres", reason="LISTEN needs PostgreSQL")
def test_an_entry_between_two_postgresql_aliases_passes_and_is_read() -> None:
    assert _check(LISTEN_DATABASES={"default": "default"}, WAKE_PROBE_INTERVAL="5s") == []
    with override_settings(ULTIMATE_JOBS={"LISTEN_DATABASES": {"default": "default"}, "WAKE_PROBE_INTERVAL": "5s"}):
        assert dict(get_settings().LISTEN_DATABASES) == {"default": "default"}
        assert get_settings().WAKE_PROBE_INTERVAL == 5.0


def test_the_probe_interval_defaults_to_a_minute_and_refuses_less_than_a_second() -> None:
    with override_settings(ULTIMATE_JOBS={}):
        assert get_settings().WAKE_PROBE_INTERVAL == 60.0
    [error] = _check(WAKE_PROBE_INTERVAL="500ms")
    assert error.id == "ultimate_jobs.E001" and "WAKE_PROBE_INTERVAL" in error.msg and "under 1s" in error.msg


class _DriverError(Exception):
    def __init__(self, message: str, sqlstate: str | None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


@pytest.mark.parametrize(("message", "sqlstate"), [
    ('prepared statement "_pg3_0" already exists', "42P05"),
    ('prepared statement "_pg3_0" does not exist', "26000"),
    ('prepared statement "_pg3_3" does not exist', None),  # a driver that keeps only the text
    ('bind message supplies 13 parameters, but prepared statement "_pg3_0" requires 7', "08P01"),
])
def test_a_poolers_prepared_statement_error_is_classified_through_djangos_wrapper(message: str,
                                                                                  sqlstate: str | None) -> None:
    try:
        try:
            raise _DriverError(message, sqlstate)
        except _DriverError as driver:
            raise ProgrammingError(message) from driver
    except ProgrammingError as wrapped:
        assert db_error_code(wrapped) == X_DB_PREPARED_STATEMENTS
    assert "prepare_threshold" in CODES[X_DB_PREPARED_STATEMENTS]


def test_other_database_errors_are_not_classified() -> None:
    assert db_error_code(ProgrammingError('relation "x" does not exist')) is None
    assert db_error_code(_DriverError("deadlock detected", "40P01")) is None
