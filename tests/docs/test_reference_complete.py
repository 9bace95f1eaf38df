"""The reference pages keep up with the code: every exported name has a section in
docs/reference/jobs.md, every settings key a row in docs/reference/settings.md, every
``jobs_worker`` option a row in docs/reference/worker.md, and every relative link in the docs
points at a file that exists."""

from __future__ import annotations

import re
from pathlib import Path

import ultimate_jobs
from ultimate_jobs.conf import JobsSettings

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "reference"


def test_every_exported_name_has_a_section() -> None:
    text = "\n".join(page.read_text() for page in sorted(REFERENCE.glob("*.md")))
    headings = set(re.findall(r"^#{2,3} `\.?([A-Za-z_]+)`", text, flags=re.MULTILINE))
    missing = sorted(set(ultimate_jobs.__all__) - headings)
    assert not missing, f"exported but without a section in any docs/reference page: {missing}"
    methods = {"enqueue", "enqueue_many", "aenqueue", "aenqueue_many", "using", "parse", "idempotency_key_for",
               "tenant_for", "concurrency_key_for", "describe"}
    assert all(callable(getattr(ultimate_jobs.JobHandle, m)) for m in methods)
    assert not methods - headings, f"JobHandle methods without a section: {sorted(methods - headings)}"


def test_every_setting_has_a_row() -> None:
    text = (REFERENCE / "settings.md").read_text()
    rows = set(re.findall(r"^\| `([A-Z_]+)` \|", text, flags=re.MULTILINE))
    keys = set(JobsSettings.__dataclass_fields__)
    assert not keys - rows, f"settings without a row in docs/reference/settings.md: {sorted(keys - rows)}"
    assert not rows - keys, f"rows for settings that do not exist: {sorted(rows - keys)}"


def test_every_worker_option_has_a_row() -> None:
    from ultimate_jobs.management.commands.jobs_worker import Command

    parser = Command().create_parser("manage.py", "jobs_worker")
    own = {opt for action in parser._actions for opt in action.option_strings
           if opt.startswith("--") and action.dest not in
           {"help", "version", "verbosity", "settings", "pythonpath", "traceback", "no_color", "force_color",
            "skip_checks"}}
    text = (REFERENCE / "worker.md").read_text()
    missing = sorted(opt for opt in own if f"| `{opt}" not in text)
    assert not missing, f"jobs_worker options without a row in docs/reference/worker.md: {missing}"


def test_relative_links_resolve() -> None:
    pages = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" in target:
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, broken
