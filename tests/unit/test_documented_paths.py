"""Every module path and name the docs showed before the move into subpackages still imports, as
the very module the code now lives in (not a copy), so users' imports and monkeypatches keep
working. The table is the one in docs/architecture.md ("Old paths")."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

# old path -> (new path, names the docs showed on it)
DOCUMENTED = {
    "ultimate_jobs.backfills": ("ultimate_jobs.factories.backfill.declaration", ["get_backfill", "backfill"]),
    "ultimate_jobs.metrics": ("ultimate_jobs.ops.metrics", ["render"]),
    "ultimate_jobs.purges": ("ultimate_jobs.factories.purge", ["cancelled", "purge"]),
    "ultimate_jobs.retention": ("ultimate_jobs.factories.retention", ["purge_retention", "FinishedJobs",
                                                                      "StoredEvents"]),
    "ultimate_jobs.tasks_ops": ("ultimate_jobs.ops.schedule", ["pause_task", "resume_task", "task_fires"]),
}

# paths that never moved, shown in docs/ and the README
UNMOVED = {
    "ultimate_jobs": ["job", "Worker", "Retry", "NO_TENANT", "ops", "testing", "clock"],
    "ultimate_jobs.ops": ["get_job", "list_jobs", "retry_job", "doctor"],
    "ultimate_jobs.testing": ["run_job", "drain", "freeze_clock", "crash_at", "record_effect"],
    "ultimate_jobs.testing.runner": ["Runner"],
    "ultimate_jobs.outbox": ["Relay"],
    "ultimate_jobs.conf": ["get_settings"],
    "ultimate_jobs.models": ["Job", "JobStep", "JobEvent"],
    "ultimate_jobs.db": ["store_for"],
    "ultimate_jobs.db.postgres": ["PostgresStore"],
    "ultimate_jobs.enqueue": ["EnqueueOptions"],
}


@pytest.mark.parametrize("old", sorted(DOCUMENTED))
def test_an_old_documented_path_is_the_new_module(old: str) -> None:
    new, names = DOCUMENTED[old]
    module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert module.__spec__ is not None and module.__spec__.name == new
    for name in names:
        assert hasattr(module, name), f"{old}.{name}"


@pytest.mark.parametrize("path", sorted(UNMOVED))
def test_an_unmoved_documented_path_answers_its_names(path: str) -> None:
    module = importlib.import_module(path)
    for name in UNMOVED[path]:
        assert hasattr(module, name), f"{path}.{name}"


def test_from_import_of_an_old_path_works_in_a_fresh_interpreter() -> None:
    """A fresh process: nothing imported the new module first, so the alias itself must load it."""
    code = ("import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'tests.settings'; django.setup(); "
            "from ultimate_jobs.retention import purge_retention; "
            "import ultimate_jobs.factories.retention as new; "
            "assert purge_retention is new.purge_retention; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout.strip()) == (0, "ok"), out.stderr


def test_import_ultimate_jobs_loads_no_submodule_before_django_is_ready() -> None:
    code = ("import sys, ultimate_jobs; "
            "print(sorted(m for m in sys.modules if m.startswith('ultimate_jobs.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout.strip()) == (0, "['ultimate_jobs._moved']"), out.stderr
