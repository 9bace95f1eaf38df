"""``jobs <subcommand> | head`` and ``jobs_worker --concurrency abc``: a closed pipe and a bad
argument end the real command with an exit code, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from tests.app import jobs

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[3]


def env() -> dict[str, str]:
    return {**os.environ, "JOBS_TEST_DB_NAME": str(connection.settings_dict["NAME"]), "PYTHONPATH": str(ROOT)}


# manage.py's entry point, with rich made unimportable (as on an install without it).
NO_RICH = ("import sys; sys.modules['rich'] = None; "
           "from django.core.management import execute_from_command_line; "
           "execute_from_command_line(['manage.py', *sys.argv[1:]])")


@pytest.mark.parametrize("rich", [True, False], ids=["rich", "plain"])
@pytest.mark.parametrize("args", [["stats"], ["ls"], ["ls", "--json"], ["workers"], ["doctor"]])
def test_a_reader_that_went_away_ends_the_command_quietly(args: list[str], rich: bool) -> None:
    jobs.noop.enqueue(key="piped")
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first write, as `| head` is once it has its lines
    command = ["-m", "django"] if rich else ["-c", NO_RICH]
    try:
        proc = subprocess.run([sys.executable, *command, "jobs", "--settings", "tests.settings", *args],
                              cwd=ROOT, env=env(), stdout=write, stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write)
    assert (proc.returncode, proc.stderr) == (141, ""), proc.stderr


def test_a_concurrency_that_is_not_a_number_is_a_coded_usage_error() -> None:
    proc = subprocess.run([sys.executable, "-m", "django", "jobs_worker", "--settings", "tests.settings",
                           "--concurrency", "abc", "--burst"], cwd=ROOT, env=env(), capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    last = proc.stderr.strip().splitlines()[-1].split(" ", 1)[1]  # after the program's name
    assert last == ("jobs_worker: error: argument --concurrency: [X_CONFIG_INVALID] concurrency 'abc' is "
                    "neither a whole number nor queue=number pairs. Fix: Pass a number of slots shared by the "
                    "queues (--concurrency 10), or one per queue (--concurrency emails=4,default=2)."), last
