"""Internal: ultimate_jobs' own jobs and tasks, discovered like any installed app's ``jobs`` module.

``ultimate_jobs.retention`` fires the retention purge hourly, at minute 17 UTC (off the top of
the hour, where application tasks crowd). It is on by default; ``ops.pause_task`` turns it off.
The purge takes no input (its batch size lives on its targets, ``ultimate_jobs.factories.retention``).
"""

from __future__ import annotations

from ultimate_jobs.factories.retention import purge_retention
from ultimate_jobs.schedule.declarations import task

retention = task(name="ultimate_jobs.retention", cron="17 * * * *", tz="UTC", job=purge_retention,
                 catch_up="skip", max_catch_up=1)
