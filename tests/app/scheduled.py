"""Tasks the scheduler process tests run (declared when JOBS_TEST_TASKS=1; see jobs.py)."""

from __future__ import annotations

from ultimate_jobs import task

from .jobs import tick

every_minute = task(name="tests.every_minute", cron="* * * * *", tz="Europe/Berlin", job=tick,
                    input={"task": "every_minute"}, catch_up="skip")
catch_a = task(name="tests.catch_a", cron="* * * * *", tz="UTC", job=tick, input={"task": "catch_a"},
               catch_up="run-all", max_catch_up=3)
catch_b = task(name="tests.catch_b", cron="* * * * *", tz="UTC", job=tick, input={"task": "catch_b"},
               catch_up="run-all", max_catch_up=3)
