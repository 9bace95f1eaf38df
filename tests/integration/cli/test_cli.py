"""``python manage.py jobs``: every subcommand, its --json answer checked against the jobs the test made,
coded errors with exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from tests.app import jobs
from tests.cli import cli
from tests.factories import JobFactory
from ultimate_jobs import Scheduler, ops
from ultimate_jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[3]


def cli_json(*args: str) -> object:
    code, out, err = cli(*args, "--json")
    assert code == 0, (out, err)
    return json.loads(out)


def test_show_json_answers_the_job_the_test_ran(make_worker) -> None:
    r = jobs.flaky.enqueue(key="show", failures=1)
    worker = make_worker(queues=["default"], burst=True, worker_id="cli-show-worker")
    worker.run(install_signals=False)
    shown = cli_json("show", str(r.id))
    assert isinstance(shown, dict)
    # Every value below is one this test planted: the input, the key template, the failure once.
    assert (shown["id"], shown["run_id"], shown["name"], shown["queue"], shown["state"]) == (
        str(r.id), str(r.run_id), "tests.flaky", "default", "done")
    assert (shown["payload"], shown["idempotency_key"], shown["tenant_id"]) == (
        {"key": "show", "failures": 1}, "flaky:show", None)
    assert (shown["attempt"], shown["max_attempts"], shown["result"]) == (2, 5, {"succeeded_on": 2})
    assert [(a["attempt"], a["outcome"], a["worker"]) for a in shown["attempts"]] == [
        (1, "retried", "cli-show-worker"), (2, "done", "cli-show-worker")]
    assert "flaky failure 1 of 1" in shown["attempts"][0]["error"] and shown["attempts"][1]["error"] is None
    code, out, _ = cli("show", str(r.id))
    # A done job has no current error: the failure shows in its attempts table.
    assert code == 0 and str(r.id) in out and "RuntimeError: flaky failure 1 of" in out and "tests.flaky" in out
    assert "X_JOB_FAILED" in out and "last error:" not in out
    # The attempt history is its own table, one row per attempt, not a JSON cell.
    rows = [line for line in out.splitlines() if "cli-show-worker" in line and ("retried" in line or "done" in line)]
    assert len(rows) == 2 and "retried" in rows[0] and "done" in rows[1], out
    assert "RuntimeError: flaky failure" in rows[0], rows[0]  # the exception, not the traceback's top


def test_retry_twice_is_refused_with_a_code_and_a_nonzero_exit() -> None:
    dead = JobFactory(dead=True)
    code, out, err = cli("retry", str(dead.id))
    assert code == 0 and "ready" in out
    code, out, err = cli("retry", str(dead.id))
    assert code == 1 and out == ""
    assert err.startswith("X_JOB_NOT_REQUEUEABLE: ") and "\nFix: " in err and "Traceback" not in err
    code, out, _ = cli("retry", str(dead.id), "--json")
    assert code == 1 and json.loads(out)["error"]["code"] == "X_JOB_NOT_REQUEUEABLE"


def test_an_unknown_id_is_not_found() -> None:
    code, _, err = cli("show", "01234567-89ab-7def-8123-456789abcdef")
    assert code == 1 and err.startswith("X_JOB_NOT_FOUND")
    code, _, err = cli("cancel", "not-a-uuid")
    assert code == 1 and err.startswith("X_ID_INVALID")


def test_ls_pages_with_cursors_and_refuses_a_limit_over_200() -> None:
    ids = [str(jobs.noop.enqueue(key=f"ls{i}").id) for i in range(5)]
    page = cli_json("ls", "--limit", "2")
    assert [(j["id"], j["name"], j["state"], j["payload"]) for j in page["jobs"]] == [
        (ids[4], "tests.noop", "ready", {"key": "ls4"}), (ids[3], "tests.noop", "ready", {"key": "ls3"})]
    assert page["previous"] is None and page["next"]
    older = cli_json("ls", "--limit", "2", "--after", page["next"])
    assert [j["id"] for j in older["jobs"]] == ids[::-1][2:4]
    code, out, err = cli("ls", "--limit", "201")
    assert code == 1 and err.startswith("X_JOB_INPUT_INVALID")
    code, out, _ = cli("ls", "--state", "dead", "--queue", "default")
    assert code == 0 and "no jobs match" in out


def test_cancel_promote_rm_and_bulk_retry() -> None:
    live, delayed, dead = JobFactory(), JobFactory(delayed=True), JobFactory(dead=True)
    assert cli_json("cancel", str(live.id), "--reason", "duplicate order")["state"] == "cancelled"
    assert cli_json("promote", str(delayed.id))["state"] == "ready"
    assert cli_json("rm", str(dead.id)) == {"id": str(dead.id), "removed": True}
    for _ in range(3):
        JobFactory(dead=True, queue="payments")
    assert cli_json("retry", "--state", "dead", "--queue", "payments", "--all", "--yes") == {"affected": 3,
                                                                                      "remaining": 0}
    code, _, err = cli("rm", str(JobFactory(running=True).id))
    assert code == 1 and err.startswith("X_JOB_NOT_REMOVABLE")
    code, _, err = cli("retry", str(live.id), "--state", "dead")
    assert code == 1 and err.startswith("X_JOB_INPUT_INVALID")


def test_stats_pause_resume_workers_tasks() -> None:
    JobFactory(dead=True, queue="payments")
    assert cli_json("pause", "payments")["paused"] is True
    stats = cli_json("stats", "--since", "1h")
    assert {q["queue"]: q["paused"] for q in stats["queues"]}["payments"] is True
    assert [q for q in stats["queues"] if q["queue"] == "payments"][0]["dead"] == 1
    assert cli_json("resume", "payments")["was_paused"] is True
    code, out, _ = cli("stats")
    assert code == 0 and "payments" in out
    assert cli_json("workers") == {"workers": []}
    assert cli_json("tasks") == {"tasks": ops.scheduled_tasks()}


def test_resolve_step_refuses_a_step_the_job_never_recorded() -> None:
    dead = JobFactory(dead=True)
    code, out, err = cli("resolve-step", str(dead.id), "charge", "--ran", "--output", '{"id": 1}')
    assert code == 1 and err.startswith("X_STEP_NOT_FOUND")


def test_doctor_reports_a_row_stuck_running_and_exits_0_when_healthy(frozen_clock, make_worker) -> None:
    from datetime import timedelta

    Scheduler().run_once()  # arms the declared tasks: without a scheduler, scheduler-watermarks is skipped
    JobFactory(done=True)
    code, out, _ = cli("doctor")
    assert code == 0 and "healthy" in out
    stuck = JobFactory(running=True, claimed_by="gone-worker", visible_at=frozen_clock.now() - timedelta(minutes=5))
    code, out, _ = cli("doctor", "--json")
    report = json.loads(out)
    assert code == 3 and report["ok"] is False
    check = next(c for c in report["checks"] if c["name"] == "stuck-running")
    assert check["ids"] == [str(stuck.id)]
    code, out, _ = cli("doctor")
    assert code == 3 and str(stuck.id) in out and "UNHEALTHY" in out
    # A live worker will rescue it: not stuck.
    worker = make_worker(queues=["default"], worker_id="gone-worker")
    worker.presence.beat([])
    assert cli("doctor")[0] == 0
    Job.objects.filter(id=stuck.id).update(state="dead")


def test_the_real_command_exits_nonzero_without_a_traceback() -> None:
    dead = JobFactory(dead=True)
    ops.retry_job(dead.id)
    env = {**os.environ, "JOBS_TEST_DB_NAME": str(connection.settings_dict["NAME"]), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "django", "jobs", "--settings", "tests.settings", "retry",
                           str(dead.id)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc
    assert proc.stderr.startswith("X_JOB_NOT_REQUEUEABLE: ") and "Traceback" not in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "django", "jobs", "--settings", "tests.settings", "ls", "--state",
                           "ready", "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert [j["id"] for j in json.loads(proc.stdout)["jobs"]] == [str(dead.id)]
