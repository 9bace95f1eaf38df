"""Every module path and name the docs show still imports: the paths a user writes (SPEC §11 lists
the factories'), whichever module the code lives in."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

# path -> names the docs show on it
DOCUMENTED = {
    "ultimate_jobs": ["job", "Worker", "Retry", "NO_TENANT", "ops", "testing", "clock", "backfill", "purge",
                      "webhook", "webhook_receiver", "verify_webhook_signature", "consumer", "export_rows",
                      "import_rows", "rollup", "refresh_view", "define_subject", "subject_export", "subject_erase"],
    "ultimate_jobs.ops": ["get_job", "list_jobs", "retry_job", "doctor"],
    "ultimate_jobs.testing": ["run_job", "drain", "freeze_clock", "crash_at", "record_effect", "subject_proof"],
    "ultimate_jobs.testing.runner": ["Runner"],
    "ultimate_jobs.webhooks": ["ModelLedger"],
    "ultimate_jobs.contrib.tasks": ["UltimateJobsBackend"],
    "ultimate_jobs.outbox": ["Relay"],
    "ultimate_jobs.conf": ["get_settings"],
    "ultimate_jobs.models": ["Job", "JobStep", "JobEvent"],
    "ultimate_jobs.db": ["store_for"],
    "ultimate_jobs.db.postgres": ["PostgresStore"],
    "ultimate_jobs.enqueue": ["EnqueueOptions"],
}


@pytest.mark.parametrize("path", sorted(DOCUMENTED))
def test_a_documented_path_answers_its_names(path: str) -> None:
    module = importlib.import_module(path)
    for name in DOCUMENTED[path]:
        assert hasattr(module, name), f"{path}.{name}"


def test_import_ultimate_jobs_loads_no_submodule_before_django_is_ready() -> None:
    code = ("import sys, ultimate_jobs; "
            "print(sorted(m for m in sys.modules if m.startswith('ultimate_jobs.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout.strip()) == (0, "[]"), out.stderr
