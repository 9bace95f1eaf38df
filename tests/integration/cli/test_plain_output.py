"""The operator commands on a plain install: no rich, and nothing a payload holds can drive the terminal.

The commands run as real processes with ``rich`` made unimportable (``sys.modules["rich"] = None``,
as on ``pip install ultimate-jobs`` without it) against jobs this test planted; the human output
must show those jobs, and the control characters planted in a payload and an error must arrive
escaped, never raw.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection

from tests.app import jobs
from tests.factories import JobFactory
from ultimate_jobs.management.render import clean

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[3]
# Block rich the way a missing distribution does, then run manage.py's entry point.
NO_RICH = ("import sys; sys.modules['rich'] = None; "
           "from django.core.management import execute_from_command_line; "
           "execute_from_command_line(['manage.py', *sys.argv[1:]]); "
           "assert 'rich.console' not in sys.modules")
HOSTILE = "\x1b]0;owned\x07\x1b[2J\x9b31m"  # set the title, clear the screen, a C1 CSI


def run_plain(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "JOBS_TEST_DB_NAME": str(connection.settings_dict["NAME"]), "PYTHONPATH": str(ROOT),
           "DJANGO_SETTINGS_MODULE": "tests.settings"}
    return subprocess.run([sys.executable, "-c", NO_RICH, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)


def test_the_shim_really_blocks_rich() -> None:
    proc = subprocess.run([sys.executable, "-c", "import sys; sys.modules['rich'] = None; import rich.console"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "ModuleNotFoundError" in proc.stderr


def test_jobs_ls_show_stats_tasks_doctor_without_rich() -> None:
    first = jobs.noop.enqueue(key="plain-one")
    second = jobs.noop.enqueue(key="plain-two")
    proc = run_plain("jobs", "ls")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["id", "state", "queue", "name", "tenant_id", "attempt", "run_at", "error_code"]
    assert set(lines[1]) <= {"-", " "}
    rows = {line.split()[0]: line.split()[1:4] for line in lines[2:]}
    assert rows == {str(first.id): ["ready", "default", "tests.noop"], str(second.id): ["ready", "default",
                                                                                        "tests.noop"]}
    proc = run_plain("jobs", "show", str(first.id))
    assert proc.returncode == 0, proc.stderr
    assert f"job {first.id}" in proc.stdout and '"key": "plain-one"' in proc.stdout
    for sub in (("stats",), ("tasks",), ("workers",), ("doctor",)):
        proc = run_plain("jobs", *sub)
        assert "Traceback" not in proc.stderr and proc.returncode in (0, 3), (sub, proc.stderr)
    proc = run_plain("jobs", "ls", "--json")
    assert proc.returncode == 0 and {j["id"] for j in json.loads(proc.stdout)["jobs"]} == {str(first.id),
                                                                                          str(second.id)}


def test_jobs_backfill_pending_without_rich() -> None:
    proc = run_plain("jobs_backfill", "--pending")
    assert "Traceback" not in proc.stderr and proc.returncode in (0, 1), proc.stderr
    assert "backfills (environment:" in proc.stdout or "none declared" in proc.stdout
    proc = run_plain("jobs_backfill", "--pending", "--json")
    assert proc.returncode in (0, 1) and "pending" in json.loads(proc.stdout)


def test_jobs_show_escapes_the_control_characters_a_payload_and_an_error_carry() -> None:
    job = JobFactory(dead=True, payload={"note": f"hi{HOSTILE}there"}, last_error=f"boom{HOSTILE}\nsecond line",
                     tenant_id=f"acme{HOSTILE}")
    for run in (lambda *a: _in_process(*a), lambda *a: run_plain(*a).stdout):
        shown = run("jobs", "show", str(job.id))
        assert "\x1b" not in shown and "\x07" not in shown and "\x9b" not in shown
        assert "\\x1b]0;owned\\x07\\x1b[2J\\x9b31m" in shown
        assert "second line" in shown  # a newline in free text is kept
        listed = run("jobs", "ls")
        assert "\x1b" not in listed and "acme\\x1b" in listed
    # --json is data, not a terminal: the planted value comes back exactly.
    data = json.loads(_in_process("jobs", "show", str(job.id), "--json"))
    assert data["payload"]["note"] == f"hi{HOSTILE}there" and data["tenant_id"] == f"acme{HOSTILE}"


def test_clean_escapes_c0_and_c1_but_keeps_text() -> None:
    assert clean("a\x00b\x1bc\x7fd\x85e\u00e9\u2603") == "a\\x00b\\x1bc\\x7fd\\x85e\u00e9\u2603"
    assert clean("tab\tnew\nline") == "tab\tnew\nline"
    assert clean("tab\tnew\nline", cell=True) == "tab new line"


def _in_process(*args: str) -> str:
    out = StringIO()
    try:
        call_command(*args, stdout=out, stderr=StringIO())
    except SystemExit:
        pass
    return out.getvalue()
