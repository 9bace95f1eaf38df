"""task() declarations and their refusals (the code, the cause naming the value and the fix, checked
whole where a developer reads them), cron parsing, and occurrences across daylight-saving changes
(no database)."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from tests.app import jobs
from tests.scheduling import utc
from ultimate_jobs import JobsError, ops, registered_tasks, task
from ultimate_jobs.schedule import cron as cron_module
from ultimate_jobs.schedule.cron import Schedule
from ultimate_jobs.schedule.declarations import _unregister

BERLIN = ZoneInfo("Europe/Berlin")
TZ_FIX = 'Use an IANA zone name such as "Europe/Berlin", "America/Bogota" or "UTC", never an offset.'
CRON_FIX = 'Write five fields, minute hour day-of-month month day-of-week, e.g. "0 3 * * *", or "@hourly".'
NEVER_FIX = "Pick a day-of-month that exists in the months you name."


def options(**overrides: object) -> dict[str, object]:
    base: dict[str, object] = {"name": "t.refused", "cron": "0 3 * * *", "tz": "Europe/Berlin",
                               "job": jobs.noop, "input": {"key": "k"}}
    return {**base, **overrides}


@pytest.mark.parametrize("tz", ["Bogota", "+02:00", "", None, 2, "localtime", "right/Europe/Berlin",
                                "europe/berlin", " Europe/Berlin", "UTC+2", "../etc/passwd"])
def test_a_time_zone_that_is_not_an_iana_name_is_refused(tz: object) -> None:
    with pytest.raises(JobsError) as caught:
        task(**options(tz=tz))  # type: ignore[arg-type]
    assert caught.value.code == "X_TASK_DECLARATION_INVALID"
    assert "IANA" in caught.value.cause or "IANA" in caught.value.fix


@pytest.mark.parametrize("cron", ["", "   ", None, "61 * * * *", "* * * *", "* * * * * *", "0 3 * * * 2026",
                                  "@reboot", "H * * * *", "every day", "0 0 31 2 *"])
def test_a_bad_cron_is_refused(cron: object) -> None:
    with pytest.raises(JobsError) as caught:
        task(**options(cron=cron))  # type: ignore[arg-type]
    assert caught.value.code == "X_TASK_DECLARATION_INVALID"


def refused_task(**overrides: object) -> tuple[str, str, str]:
    """Declare a task through the public ``task()``; answer the refusal's three parts."""
    with pytest.raises(JobsError) as caught:
        task(**options(**overrides))  # type: ignore[arg-type]
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


@pytest.mark.parametrize(("tz", "cause", "fix"), [
    ("EST", "tz='EST' is a legacy abbreviation, not the zone of a place: a fixed UTC-05:00 all year, with no "
     "daylight saving.", 'Use the IANA zone of the place: "America/New_York" (Eastern time, with daylight '
     'saving), or "America/Panama" for UTC-05:00 all year.'),
    ("CET", "tz='CET' is a legacy abbreviation, not the zone of a place.",
     'Use the IANA zone of the place: "Europe/Berlin", "Europe/Paris" or your city\'s zone.'),
    ("PST8PDT", "tz='PST8PDT' is a legacy abbreviation, not the zone of a place.",
     'Use the IANA zone of the place: "America/Los_Angeles".'),
    ("Etc/GMT+5", "tz='Etc/GMT+5' is a fixed offset (UTC-05:00 all year, no daylight saving), not the zone of a "
     "place.", 'Use the IANA zone of the place the task follows, e.g. "America/Bogota" or "Europe/Berlin"; '
     '"UTC" for no zone at all.'),
    ("Etc/GMT-14", "tz='Etc/GMT-14' is a fixed offset (UTC+14:00 all year, no daylight saving), not the zone of "
     "a place.", 'Use the IANA zone of the place the task follows, e.g. "America/Bogota" or "Europe/Berlin"; '
     '"UTC" for no zone at all.'),
])
def test_a_legacy_abbreviation_or_fixed_offset_zone_is_refused_naming_the_place_zone(tz: str, cause: str,
                                                                                     fix: str) -> None:
    # Each loads as a zone (tzdata ships them); each would run an occurrence at the wrong hour.
    assert ZoneInfo(tz) is not None
    assert refused_task(tz=tz) == ("X_TASK_DECLARATION_INVALID", cause, fix)


@pytest.mark.parametrize("tz", ["UTC", "Etc/UTC", "GMT", "Etc/GMT0", "US/Eastern", "America/Bogota"])
def test_utc_and_the_zones_of_places_are_accepted(tz: str) -> None:
    assert Schedule.parse("0 3 * * *", tz).tz.key == tz


def test_a_zone_the_system_loads_but_iana_does_not_list_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cron_module, "_zone_names", lambda: frozenset({"UTC"}))  # planted: Berlin is not listed
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


@pytest.mark.parametrize("bad", [{"catch_up": "sometimes"}, {"catch_up": None}, {"catch_up": "run_all"},
                                 {"max_catch_up": 0}, {"max_catch_up": -1}, {"max_catch_up": True},
                                 {"max_catch_up": 1.5}, {"max_catch_up": "10"}, {"max_catch_up": 1001},
                                 {"job": lambda ctx, *, key: None}, {"job": "tests.noop"},
                                 {"input": {"nope": 1}}, {"input": {}}, {"input": [{"key": "k"}]},
                                 {"name": ""}, {"name": " padded"}])
def test_bad_options_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(JobsError) as caught:
        task(**options(**bad))  # type: ignore[arg-type]
    assert caught.value.code == "X_TASK_DECLARATION_INVALID"
    assert "t.refused" not in [t.name for t in registered_tasks()]


def test_a_second_module_declaring_the_same_name_is_refused(declare_task) -> None:
    declare_task(**options(name="t.twice"))
    declare_task(**options(name="t.twice", cron="0 4 * * *"))  # the same module again (a re-import) replaces
    elsewhere = {"__name__": "other.jobs", "task": task, "options": options}
    with pytest.raises(JobsError) as caught:
        exec("task(**options(name='t.twice'))", elsewhere)
    assert caught.value.code == "X_TASK_DUPLICATE"
    assert [t.cron for t in registered_tasks() if t.name == "t.twice"] == ["0 4 * * *"]


def test_declared_tasks_are_listed_by_name_with_the_built_in_retention_purge(declare_task) -> None:
    declare_task(**options(name="t.b"))
    declare_task(**options(name="t.a", cron="@hourly"))
    names = [t.name for t in registered_tasks()]
    assert names == sorted(names)
    assert {"t.a", "t.b", "ultimate_jobs.retention"} <= set(names)
    assert [t.cron for t in registered_tasks() if t.name == "t.a"] == ["0 * * * *"]
    retention = next(t for t in registered_tasks() if t.name == "ultimate_jobs.retention")
    assert (retention.cron, retention.tz) == ("17 * * * *", "UTC")
    assert retention.job.name == "ultimate_jobs.purge_retention"


# -- occurrences across daylight-saving changes ----------------------------------------------


def test_spring_forward_fires_a_swallowed_time_once_at_the_first_instant_after_the_gap(declare_task) -> None:
    nightly = declare_task(**options(name="t.nightly", cron="30 2 * * *"))
    first = ops.next_task_run(nightly, utc(2026, 3, 28, 12))
    assert first == utc(2026, 3, 29, 1, 0)  # 02:30 does not exist; 03:00 CEST is the first instant after
    assert first.astimezone(BERLIN).strftime("%H:%M %Z") == "03:00 CEST"
    assert ops.next_task_run("t.nightly", first) == utc(2026, 3, 30, 0, 30)  # 02:30 CEST again


def test_fall_back_fires_an_ambiguous_time_once_at_its_first_occurrence(declare_task) -> None:
    nightly = declare_task(**options(name="t.nightly", cron="30 2 * * *"))
    first = ops.next_task_run(nightly, utc(2026, 10, 24, 12))
    assert first == utc(2026, 10, 25, 0, 30)  # 02:30 CEST, the first of the two 02:30s
    assert ops.next_task_run(nightly, first) == utc(2026, 10, 26, 1, 30)  # not 01:30 UTC (the second 02:30)


def test_every_quarter_hour_fires_once_at_0300_for_the_four_times_the_gap_swallowed(declare_task) -> None:
    quarter = declare_task(**options(name="t.quarter", cron="*/15 * * * *"))
    fires, at = [], utc(2026, 3, 29, 0, 40)  # 01:40 CET
    while len(fires) < 4:
        at = ops.next_task_run(quarter, at)
        fires.append(at.astimezone(BERLIN).strftime("%H:%M"))
    assert fires == ["01:45", "03:00", "03:15", "03:30"]
    due = quarter.schedule.latest(after=utc(2026, 3, 29, 0, 40), until=utc(2026, 3, 29, 1, 20), limit=10)
    assert due == [utc(2026, 3, 29, 0, 45), utc(2026, 3, 29, 1, 0), utc(2026, 3, 29, 1, 15)]


def test_every_quarter_hour_skips_the_repeated_hour_when_clocks_fall_back(declare_task) -> None:
    quarter = declare_task(**options(name="t.quarter", cron="*/15 * * * *"))
    fires, at = [], utc(2026, 10, 24, 23, 50)
    while len(fires) < 6:
        at = ops.next_task_run(quarter, at)
        fires.append(at.strftime("%H:%M UTC"))
    assert fires == ["00:00 UTC", "00:15 UTC", "00:30 UTC", "00:45 UTC", "02:00 UTC", "02:15 UTC"]


@pytest.mark.parametrize(("cron", "tz", "start"), [
    ("*/15 * * * *", "Europe/Berlin", utc(2026, 1, 1)),
    ("30 2 * * *", "Europe/Berlin", utc(2026, 1, 1)),
    ("0 * * * *", "Australia/Lord_Howe", utc(2026, 1, 1)),  # a 30-minute DST shift
    ("*/7 1-3 * * *", "America/New_York", utc(2026, 1, 1)),
    ("0 0 * * *", "Pacific/Apia", utc(2011, 12, 27)),  # the day Samoa skipped
])
def test_the_backward_walk_agrees_with_the_forward_one(cron: str, tz: str, start: datetime) -> None:
    schedule = Schedule.parse(cron, tz)
    zone = ZoneInfo(tz)
    hours = [start + timedelta(hours=n) for n in range(366 * 24)]
    changes = [b for a, b in zip(hours, hours[1:], strict=False) if a.astimezone(zone).utcoffset()
               != b.astimezone(zone).utcoffset()]
    assert changes  # every zone above changes its offset in the year walked
    rng = random.Random(6)
    for _ in range(60):  # windows around the offset changes, where a walk can go wrong
        after = rng.choice(changes) + timedelta(seconds=rng.randrange(-30 * 3600, 6 * 3600))
        until = after + timedelta(hours=rng.randrange(1, 30))
        forward, at = [], after
        while (at := schedule.next_after(at)) <= until:
            forward.append(at)
        limit = rng.randrange(1, 15)
        assert schedule.latest(after=after, until=until, limit=limit) == forward[-limit:]


def test_a_year_long_outage_costs_max_catch_up_steps_not_a_year() -> None:
    every_minute = Schedule.parse("* * * * *", "UTC")
    due = every_minute.latest(after=utc(2025, 1, 1), until=utc(2026, 1, 1, 0, 0, 30), limit=3)
    assert due == [utc(2025, 12, 31, 23, 58), utc(2025, 12, 31, 23, 59), utc(2026, 1, 1)]


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


def test_next_task_run_refuses_a_naive_after_and_an_unknown_task(declare_task) -> None:
    declare_task(**options(name="t.known"))
    with pytest.raises(JobsError) as naive:
        ops.next_task_run("t.known", datetime(2026, 1, 1))
    assert naive.value.code == "X_JOB_INPUT_INVALID"
    with pytest.raises(JobsError) as unknown:
        ops.next_task_run("t.unknown", utc(2026, 1, 1))
    assert unknown.value.code == "X_TASK_NOT_FOUND"
    assert ops.next_task_run("t.known", datetime(2026, 1, 1, 12, tzinfo=BERLIN)) == utc(2026, 1, 2, 2)


# -- the rows an occurrence enqueues -----------------------------------------------------------


def test_an_occurrence_keys_its_jobs_by_task_occurrence_and_job_key(declare_task) -> None:
    seen: list[datetime] = []

    def inputs(occurrence: datetime) -> list[dict[str, str]]:
        seen.append(occurrence)
        return [{"key": "a"}, {"key": "b"}]

    fan_out = declare_task(name="t.fan-out", cron="0 3 * * *", tz="Europe/Berlin", job=jobs.noop,
                           input=inputs)
    at = utc(2026, 6, 1, 1)
    rows = fan_out.rows_for(at)
    ms = int(at.timestamp() * 1000)
    assert [r.idempotency_key for r in rows] == [f"t.fan-out:{ms}:a", f"t.fan-out:{ms}:b"]
    assert {r.enqueued_by for r in rows} == {"task:t.fan-out"}
    assert seen == [at] and seen[0].tzinfo is not None


def test_an_input_callable_answering_a_non_dict_is_refused_at_fire_time(declare_task) -> None:
    broken = declare_task(name="t.broken", cron="0 3 * * *", tz="UTC", job=jobs.noop, input=lambda at: "nope")
    with pytest.raises(JobsError) as caught:
        broken.rows_for(utc(2026, 6, 1, 3))
    assert caught.value.code == "X_JOB_INPUT_INVALID"


def test_test_support_unregisters(declare_task) -> None:
    declare_task(**options(name="t.gone"))
    _unregister("t.gone")
    assert "t.gone" not in [t.name for t in registered_tasks()]
