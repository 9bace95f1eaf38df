"""Internal: ultimate_jobs' own jobs and tasks, discovered like any installed app's ``jobs`` module.

``ultimate_jobs.retention`` fires the retention purge hourly, at minute 17 UTC (off the top of
the hour, where application tasks crowd). It is on by default; ``ops.pause_task`` turns it off.
"""

from __future__ import annotations

from .retention import purge_retention
from .tasks import task

retention = task(name="ultimate_jobs.retention", cron="17 * * * *", tz="UTC", job=purge_retention,
                 input={"batch": 1000}, catch_up="skip", max_catch_up=1)
