"""Cron and time-zone parsing against values worked out by hand: each test here kills mutants of
``ultimate_jobs/schedule/cron.py`` that the behaviour tests let live (``make mutation``). The
refusals are checked whole (code, cause naming the value, fix), since the cause and the fix are
what a developer reads."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.app import jobs
from ultimate_jobs import JobsError, task
from ultimate_jobs.schedule import cron
from ultimate_jobs.schedule.cron import Schedule

TZ_FIX = 'Use an IANA zone name such as "Europe/Berlin", "America/Bogota" or "UTC", never an offset.'
CRON_FIX = 'Write five fields, minute hour day-of-month month day-of-week, e.g. "0 3 * * *", or "@hourly".'
NEVER_FIX = "Pick a day-of-month that exists in the months you name."


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


def refused_task(**options: object) -> tuple[str, str, str]:
    """Declare a task through the public ``task()``; answer the refusal's three parts."""
    declaration = {"name": "t.mutants", "cron": "0 3 * * *", "tz": "Europe/Berlin", "job": jobs.noop,
                   "input": {"key": "k"}, **options}
    with pytest.raises(JobsError) as caught:
        task(**declaration)  # type: ignore[arg-type]
    return caught.value.code, caught.value.cause, caught.value.fix


@pytest.mark.parametrize(("tz", "cause"), [
    ("", "tz='' is not an IANA time zone name."),
    (" UTC", "tz=' UTC' is not an IANA time zone name."),
    (None, "tz=None is not an IANA time zone name."),
    ("localtime", "tz='localtime' is a host file, not an IANA time zone."),
    ("posix/Europe/Berlin", "tz='posix/Europe/Berlin' is a host file, not an IANA time zone."),
    ("Mars/Olympus_Mons", "tz='Mars/Olympus_Mons' is not an IANA time zone name."),
])
def test_a_bad_zone_is_refused_with_its_value_and_the_fix(tz: object, cause: str) -> None:
    assert refused_task(tz=tz) == ("X_TASK_DECLARATION_INVALID", cause, TZ_FIX)


def test_a_zone_the_system_loads_but_iana_does_not_list_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cron, "_zone_names", lambda: frozenset({"UTC"}))  # planted: Berlin is not listed
    assert refused_task(tz="Europe/Berlin") == (
        "X_TASK_DECLARATION_INVALID", "tz='Europe/Berlin' is not an IANA time zone name.", TZ_FIX)
    assert Schedule.parse("0 3 * * *", "UTC").tz.key == "UTC"


@pytest.mark.parametrize(("expression", "cause"), [
    ("", "cron='' is not a cron expression."),
    ("   ", "cron='   ' is not a cron expression."),
    (7, "cron=7 is not a cron expression."),
    ("* * * *", "cron='* * * *' is not a five-field cron expression."),
    ("61 * * * *", "cron='61 * * * *' is not a five-field cron expression."),
    ("@reboot", "cron='@reboot' is not a five-field cron expression."),
])
def test_a_bad_cron_is_refused_with_its_value_and_the_fix(expression: object, cause: str) -> None:
    assert refused_task(cron=expression) == ("X_TASK_DECLARATION_INVALID", cause, CRON_FIX)


def test_a_cron_that_never_fires_is_refused_with_its_own_fix() -> None:
    assert refused_task(cron="0 0 31 2 *") == (
        "X_TASK_DECLARATION_INVALID", "cron='0 0 31 2 *' never fires (no such date).", NEVER_FIX)


def test_aliases_and_spacing_normalise_to_five_fields() -> None:
    assert Schedule.parse("  @Daily ", "UTC").cron == "0 0 * * *"
    assert Schedule.parse("0   3 *  * *", "UTC").cron == "0 3 * * *"


def test_the_backward_walk_steps_out_of_a_repeated_hour() -> None:
    # Berlin falls back at 01:00 UTC on 2024-10-27 (03:00 CEST -> 02:00 CET). `until` lies in the
    # first 02:xx, so the walk has to start beyond the repeat: hourly fires 23:00 and 00:00 UTC.
    hourly = Schedule.parse("0 * * * *", "Europe/Berlin")
    assert hourly.latest(after=utc(2024, 10, 26, 22, 30), until=utc(2024, 10, 27, 0, 30), limit=5) == [
        utc(2024, 10, 26, 23), utc(2024, 10, 27, 0)]
    assert hourly.latest(after=utc(2024, 10, 26, 22, 30), until=utc(2024, 10, 27, 0, 30), limit=1) == [
        utc(2024, 10, 27, 0)]


def test_an_empty_window_or_a_zero_limit_answers_nothing() -> None:
    hourly = Schedule.parse("0 * * * *", "UTC")
    assert hourly.latest(after=utc(2026, 1, 1), until=utc(2026, 1, 2), limit=0) == []
    assert hourly.latest(after=utc(2026, 1, 2), until=utc(2026, 1, 1), limit=3) == []
    assert hourly.latest(after=utc(2026, 1, 1), until=utc(2026, 1, 1), limit=3) == []


def test_naive_datetimes_are_refused_on_either_side() -> None:
    hourly = Schedule.parse("0 * * * *", "UTC")
    with pytest.raises(ValueError, match=r"^latest\(\) needs aware datetimes$"):
        hourly.latest(after=datetime(2026, 1, 1), until=utc(2026, 1, 2), limit=1)
    with pytest.raises(ValueError, match=r"^latest\(\) needs aware datetimes$"):
        hourly.latest(after=utc(2026, 1, 1), until=datetime(2026, 1, 2), limit=1)
    with pytest.raises(ValueError, match=r"^next_after\(\) needs an aware datetime$"):
        hourly.next_after(datetime(2026, 1, 1))


def test_a_swallowed_time_fires_at_the_end_of_the_gap() -> None:
    # Berlin springs forward at 01:00 UTC on 2024-03-31: 02:30 local does not exist.
    schedule = Schedule.parse("30 2 * * *", "Europe/Berlin")
    assert schedule.instant(datetime(2024, 3, 31, 2, 30)) == utc(2024, 3, 31, 1)
    assert schedule.next_after(utc(2024, 3, 30, 12)) == utc(2024, 3, 31, 1)
