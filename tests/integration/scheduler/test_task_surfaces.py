"""A task fired at a known occurrence shows that fire on every surface: ops, the admin page, `jobs tasks`.

Each surface is checked against the instants this test froze, never against another surface.
"""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from tests.app import jobs
from tests.scheduling import utc
from ultimate_jobs import Scheduler, ops

pytestmark = pytest.mark.django_db(transaction=True)

ARMED = utc(2026, 6, 1, 10, 0, 30)
FIRED = utc(2026, 6, 1, 10, 1, 7)  # the scheduler's round, seven seconds after the occurrence
OCCURRENCE = "2026-06-01T10:01:00Z"
FIRED_ISO = "2026-06-01T10:01:07Z"


@pytest.fixture
def fired_task(declare_task, frozen_at):
    every = declare_task(name="t.surfaces", cron="* * * * *", tz="UTC", job=jobs.noop, input={"key": "tick"})
    frozen_at(ARMED)
    Scheduler(tasks=[every]).run_once()  # arms at 10:00:30, fires nothing
    frozen_at(FIRED)
    assert Scheduler(tasks=[every]).run_once() is not None
    return every


def test_ops_scheduled_tasks_shows_the_fire(fired_task) -> None:
    row = next(t for t in ops.scheduled_tasks() if t["task"] == "t.surfaces")
    assert row["last_fire"] == FIRED_ISO
    assert row["last_occurrence"] == OCCURRENCE
    assert row["next_run"] == "2026-06-01T10:02:00Z"
    assert row["paused"] is False


def test_jobs_tasks_shows_the_fire_in_json_and_in_its_table(fired_task) -> None:
    out = StringIO()
    call_command("jobs", "tasks", "--json", stdout=out)
    row = next(t for t in json.loads(out.getvalue())["tasks"] if t["task"] == "t.surfaces")
    assert (row["last_fire"], row["last_occurrence"]) == (FIRED_ISO, OCCURRENCE)
    out = StringIO()
    call_command("jobs", "tasks", stdout=out)
    line = next(line for line in out.getvalue().splitlines() if "t.surfaces" in line)
    assert FIRED_ISO in line and "never" not in line


def test_the_admin_tasks_page_shows_the_fire(fired_task) -> None:
    client = Client()
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    page = client.get("/admin/ultimate_jobs/job/tasks/").content.decode()
    row = page[page.index("t.surfaces"):]
    row = row[: row.index("</tr>")]
    assert FIRED_ISO in row and "never" not in row


def test_a_task_never_fired_says_so(declare_task, frozen_at) -> None:
    declare_task(name="t.quiet", cron="0 3 * * *", tz="UTC", job=jobs.noop, input={"key": "q"})
    frozen_at(ARMED)
    row = next(t for t in ops.scheduled_tasks() if t["task"] == "t.quiet")
    assert (row["last_fire"], row["last_occurrence"]) == (None, None)
    assert row["next_run"] == (utc(2026, 6, 2, 3, 0) + timedelta(0)).isoformat().replace("+00:00", "Z")
