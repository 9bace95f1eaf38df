"""The terminal half of the on-call console: id prefixes and short forms wherever an id is taken,
``jobs top`` (also without rich), and every overview number in ``jobs stats --json`` — each checked
against jobs, ids and counts this test planted or ran."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from django.db import connection

from tests.cli import cli
from tests.factories import JobFactory
from ultimate_jobs import NO_TENANT, Retry, Worker, ops
from ultimate_jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[3]
TWINS = (UUID("01a23171-458e-7000-8000-00000000aaaa"), UUID("01a23171-458e-7000-8000-00000000bbbb"))
NO_RICH = ("import sys; sys.modules['rich'] = None; "
           "from django.core.management import execute_from_command_line; "
           "execute_from_command_line(['manage.py', *sys.argv[1:]]); "
           "assert 'rich.console' not in sys.modules")


def test_an_id_prefix_or_short_form_works_wherever_an_id_is_taken() -> None:
    one, other = JobFactory(dead=True, id=TWINS[0]), JobFactory(dead=True, id=TWINS[1])
    code, out, err = cli("show", "01a23171-458e-7000-8000-00000000a")
    assert code == 0 and f"job {one.id}" in out, err
    short = ops.short_form(str(other.id))
    assert short == "01a23171\u2026bbbb"
    code, out, _ = cli("show", short, "--json")
    assert code == 0 and json.loads(out)["id"] == str(other.id)
    assert cli("show", "01a23171...aaaa", "--json")[0] == 0
    code, out, _ = cli("retry", "01a23171-458e-7000-8000-00000000b", "--json")
    assert code == 0 and json.loads(out)["state"] == "ready"
    assert Job.objects.get(id=other.id).state == "ready" and Job.objects.get(id=one.id).state == "dead"


def test_an_ambiguous_prefix_is_a_coded_refusal_listing_the_matches_and_changes_nothing() -> None:
    for job_id in TWINS:
        JobFactory(dead=True, id=job_id)
    before = sorted(Job.objects.values_list("id", "state", "updated_at"))
    for args in (("show", "01a23171"), ("retry", "01a23171-458e"), ("rm", "01a2317"), ("cancel", "01a23171"),
                 ("resolve-step", "01a23171", "charge", "--ran")):
        code, out, err = cli(*args)
        assert code == 1, args
        assert "X_ID_AMBIGUOUS" in err and all(str(i) in err for i in TWINS), (args, err)
    code, out, _ = cli("rm", "01a23171", "--json")
    error = json.loads(out)["error"]
    assert code == 1 and error["code"] == "X_ID_AMBIGUOUS" and str(TWINS[1]) in error["cause"]
    assert sorted(Job.objects.values_list("id", "state", "updated_at")) == before
    code, _, err = cli("show", "ffff0000")
    assert code == 1 and "X_JOB_NOT_FOUND" in err
    code, _, err = cli("show", "not-hex!")
    assert code == 1 and "X_ID_INVALID" in err


def _run_console_jobs(declare: Any) -> list[Job]:
    @declare(name="console.ok", queue="console", idempotency_key="ok:{n}", tenant=NO_TENANT)
    def ok(ctx: Any, *, n: int) -> None: ...

    @declare(name="console.broken", queue="console", idempotency_key="broken:{n}", tenant=NO_TENANT,
             retry=Retry(attempts=1))
    def broken(ctx: Any, *, n: int) -> None:
        raise RuntimeError("broken")

    for n in range(4):
        ok.enqueue(n=n)
    broken.enqueue(n=1)
    with Worker(queues=["console"], burst=True) as worker:
        worker.run(install_signals=False)
    for n in range(10, 12):
        ok.enqueue(n=n)
    return list(Job.objects.filter(name="console.broken"))


def test_jobs_stats_json_carries_every_number_the_overview_shows(declare) -> None:
    dead = _run_console_jobs(declare)
    code, out, err = cli("stats", "--json")
    assert code == 0, err
    view = json.loads(out)["overview"]
    queue = next(q for q in view["queues"] if q["queue"] == "console")
    assert (sum(queue["hour"]["done"]), sum(queue["hour"]["failed"])) == (4, 1)
    assert (sum(queue["day"]["done"]), sum(queue["day"]["failed"])) == (4, 1)
    assert len(queue["hour"]["done"]) == 60 and queue["hour"]["width"] == 60 and queue["day"]["width"] == 900
    assert queue["depth"] == 2 and queue["oldest_ready_age"] is not None
    assert [d["id"] for d in view["dead_last_day"]] == [str(dead[0].id)] and view["dead_last_day_count"] == 1
    assert {"workers", "tasks_due", "at"} <= set(view)
    # `jobs top --json` is the same document.
    code, out, _ = cli("top", "--json")
    top = json.loads(out)
    assert code == 0 and next(q for q in top["queues"] if q["queue"] == "console")["depth"] == 2


def test_jobs_workers_json_is_an_object_like_every_other_subcommand(make_worker) -> None:
    worker = make_worker(queues=["console"])
    worker.presence.beat([])
    code, out, _ = cli("workers", "--json")
    assert code == 0 and [w["id"] for w in json.loads(out)["workers"]] == [worker.worker_id]


def test_jobs_top_draws_queues_workers_and_dead_jobs_without_rich(declare, make_worker) -> None:
    dead = _run_console_jobs(declare)
    worker = make_worker(queues=["console"])
    worker.presence.beat([])
    env = {**os.environ, "JOBS_TEST_DB_NAME": str(connection.settings_dict["NAME"]), "PYTHONPATH": str(ROOT),
           "DJANGO_SETTINGS_MODULE": "tests.settings"}
    proc = subprocess.run([sys.executable, "-c", NO_RICH, "jobs", "top", "--iterations", "2", "--interval", "200ms"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    frames = [f for f in proc.stdout.split("jobs top ") if f.strip()]
    assert len(frames) == 2
    lines = frames[-1].splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("QUEUE"))
    row = next(line.split() for line in lines[header:] if line.split()[:1] == ["console"])
    # QUEUE DEPTH OLDEST RUNNING DELAYED DONE5m FAILED5m DONE1h FAILED1h
    assert row[1] == "2" and row[5:9] == ["4", "1", "4", "1"]
    assert "WORKERS (1 alive)" in frames[-1] and worker.worker_id in frames[-1]
    assert "DEAD IN THE LAST 24 H: 1" in frames[-1] and ops.short_form(str(dead[0].id)) in frames[-1]
