"""Internal: cron expression + IANA zone -> occurrences, as aware UTC instants. Pure: no I/O, no clock.

Cron matches local wall-clock times; ``croniter`` walks them on naive datetimes and this module
maps each to one instant with the DST rule of SPEC §8:

- a local time that does not exist (spring forward) fires at the first instant after the gap,
  so several swallowed times (``*/15`` at 02:00, 02:15, 02:30, 02:45) fire once, there;
- a local time that happens twice (fall back) fires once, at its first occurrence; the repeat
  of the hour fires nothing.

The map from wall time to instant is monotonic (never decreasing), which is what makes the
forward walk in ``next_after`` and the backward walk in ``latest`` correct and bounded.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from croniter import CroniterError, croniter

from ultimate_jobs.errors import X_INVARIANT, X_TASK_DECLARATION_INVALID, JobsError

ALIASES = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}
# Host files or leap-second tables, not IANA zone names: "localtime" follows the machine, and
# "right/..." counts leap seconds, which would shift every occurrence by ~27 s.
_NOT_IANA_PREFIXES = ("posix/", "right/")
_NOT_IANA = {"localtime", "posixrules"}
_MAX_STEPS = 100_000  # wall times one walk may visit; far past any zone's fold or gap
# tzdata's legacy abbreviation zones: each a fixed offset or a rule set tied to no place ("EST" is
# UTC-05:00 all year, an hour off New York all summer). Each maps to the fix: the zone of a place.
_ABBREVIATIONS = {
    "EST": ('"America/New_York" (Eastern time, with daylight saving), or "America/Panama" for UTC-05:00 all '
            "year"),
    "MST": '"America/Denver" (Mountain time, with daylight saving), or "America/Phoenix" for UTC-07:00 all year',
    "HST": '"Pacific/Honolulu"',
    "EST5EDT": '"America/New_York"', "CST6CDT": '"America/Chicago"', "MST7MDT": '"America/Denver"',
    "PST8PDT": '"America/Los_Angeles"',
    "CET": '"Europe/Berlin", "Europe/Paris" or your city\'s zone', "MET": '"Europe/Berlin" or your city\'s zone',
    "EET": '"Europe/Athens", "Europe/Helsinki" or your city\'s zone', "WET": '"Europe/Lisbon"',
}
_FIXED_OFFSET = re.compile(r"Etc/GMT([+-])(\d{1,2})\Z")


@functools.cache
def _zone_names() -> frozenset[str]:
    return frozenset(available_timezones())


def zone(tz: object) -> ZoneInfo:
    """The ``ZoneInfo`` for an IANA name; raise ``X_TASK_DECLARATION_INVALID`` for anything else."""
    fix = 'Use an IANA zone name such as "Europe/Berlin", "America/Bogota" or "UTC", never an offset.'
    if not isinstance(tz, str) or not tz or tz != tz.strip():
        raise JobsError(X_TASK_DECLARATION_INVALID, f"tz={tz!r} is not an IANA time zone name.", fix)
    if tz in _NOT_IANA or tz.startswith(_NOT_IANA_PREFIXES):
        raise JobsError(X_TASK_DECLARATION_INVALID, f"tz={tz!r} is a host file, not an IANA time zone.", fix)
    if tz in _ABBREVIATIONS:
        raise JobsError(X_TASK_DECLARATION_INVALID, f"tz={tz!r} is a legacy abbreviation, not the zone of a place"
                        f"{_fixed_note(tz)}.", f"Use the IANA zone of the place: {_ABBREVIATIONS[tz]}.")
    offset = _FIXED_OFFSET.match(tz)
    if offset is not None and int(offset.group(2)) != 0:
        # POSIX signs: Etc/GMT+5 is five hours *behind* UTC.
        hours = f"UTC{'-' if offset.group(1) == '+' else '+'}{int(offset.group(2)):02d}:00"
        raise JobsError(X_TASK_DECLARATION_INVALID, f"tz={tz!r} is a fixed offset ({hours} all year, no daylight "
                        "saving), not the zone of a place.",
                        'Use the IANA zone of the place the task follows, e.g. "America/Bogota" or '
                        '"Europe/Berlin"; "UTC" for no zone at all.')
    try:
        found = ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise JobsError(X_TASK_DECLARATION_INVALID, f"tz={tz!r} is not an IANA time zone name.",
                        fix) from None
    names = _zone_names()
    if names and tz not in names:
        raise JobsError(X_TASK_DECLARATION_INVALID, f"tz={tz!r} is not an IANA time zone name.", fix)
    return found


def _fixed_note(tz: str) -> str:
    """``": a fixed UTC-05:00 all year, ..."`` for a zone without daylight saving; "" for one with it."""
    try:
        found = ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        return ""
    winter, summer = (datetime(2026, month, 1, tzinfo=found).utcoffset() for month in (1, 7))
    if winter != summer or winter is None:
        return ""
    minutes = int(winter.total_seconds() // 60)
    sign = "-" if minutes < 0 else "+"
    return f": a fixed UTC{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d} all year, with no daylight saving"


def expression(cron: object) -> str:
    """The normalised five-field expression; raise ``X_TASK_DECLARATION_INVALID`` when croniter refuses it."""
    fix = 'Write five fields, minute hour day-of-month month day-of-week, e.g. "0 3 * * *", or "@hourly".'
    if not isinstance(cron, str) or not cron.strip():
        raise JobsError(X_TASK_DECLARATION_INVALID, f"cron={cron!r} is not a cron expression.", fix)
    text = " ".join(cron.split())
    text = ALIASES.get(text.lower(), text)
    if len(text.split()) != 5 or not croniter.is_valid(text):
        raise JobsError(X_TASK_DECLARATION_INVALID, f"cron={cron!r} is not a five-field cron expression.",
                        fix)
    return text


@dataclass(frozen=True, slots=True)
class Schedule:
    """One task's occurrences: ``next_after`` and ``latest`` answer aware UTC datetimes."""

    cron: str
    tz: ZoneInfo

    @classmethod
    def parse(cls, cron: object, tz: object) -> Schedule:
        """Validate both halves; refuse (``X_TASK_DECLARATION_INVALID``) a cron that never fires."""
        schedule = cls(expression(cron), zone(tz))
        try:
            schedule.next_after(datetime(2000, 1, 1, tzinfo=UTC))
        except (CroniterError, JobsError):
            raise JobsError(X_TASK_DECLARATION_INVALID, f"cron={cron!r} never fires (no such date).",
                            "Pick a day-of-month that exists in the months you name.") from None
        return schedule

    def instant(self, wall: datetime) -> datetime:
        """The one instant a matching naive wall time fires at (the DST rule in the module docstring)."""
        first = wall.replace(tzinfo=self.tz, fold=0).astimezone(UTC)
        second = wall.replace(tzinfo=self.tz, fold=1).astimezone(UTC)
        if first <= second:  # unambiguous (equal), or fall back: fold=0 is the first of the two
            return first
        # In a gap fold=0 reads the time with the offset from before the change, fold=1 with the
        # one after, so the change itself lies in (second, first]: find it to the second.
        low, high = second, first
        after = high.astimezone(self.tz).utcoffset()
        while high - low > timedelta(seconds=1):
            middle = low + (high - low) / 2
            middle = middle.replace(microsecond=0)
            if middle.astimezone(self.tz).utcoffset() == after:
                high = middle
            else:
                low = middle
        return high

    def next_after(self, after: datetime) -> datetime:
        """The first occurrence strictly after ``after`` (aware)."""
        if after.tzinfo is None:
            raise ValueError("next_after() needs an aware datetime")
        # Every wall time up to after's own maps at or before it (the map is monotonic), so the
        # walk starts there; a fold's repeated hour is walked past, bounded by _MAX_STEPS.
        walk = croniter(self.cron, after.astimezone(self.tz).replace(tzinfo=None, fold=0))
        for _ in range(_MAX_STEPS):
            at = self.instant(walk.get_next(datetime))
            if at > after:
                return at
        raise JobsError(X_INVARIANT, f"cron {self.cron!r} in {self.tz.key}: no occurrence within "
                        f"{_MAX_STEPS} steps.")

    def latest(self, *, after: datetime, until: datetime, limit: int) -> list[datetime]:
        """The newest ``limit`` occurrences in ``(after, until]``, oldest first: a backward walk, so a
        year-long outage costs ``limit`` steps, not a year of them."""
        if after.tzinfo is None or until.tzinfo is None:
            raise ValueError("latest() needs aware datetimes")
        if until <= after or limit < 1:
            return []
        # Start from a wall time that maps past `until` (a fold can map a wall time up to its
        # length earlier), then walk back, dropping what lies after `until`.
        ahead = timedelta(hours=1)
        while self.instant((until + ahead).astimezone(self.tz).replace(tzinfo=None, fold=0)) <= until:
            ahead *= 2
        walk = croniter(self.cron, (until + ahead).astimezone(self.tz).replace(tzinfo=None, fold=0))
        found: list[datetime] = []
        for _ in range(_MAX_STEPS):
            at = self.instant(walk.get_prev(datetime))
            if at <= after:
                break
            if at <= until and (not found or found[-1] != at):  # a gap's swallowed times share one instant
                found.append(at)
                if len(found) == limit:
                    break
        return found[::-1]
