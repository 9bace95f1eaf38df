"""Every import the docs show works: a reader who copies ``from ultimate_jobs... import X`` from
the README, a docs page or an example gets ``X``, never an ``ImportError``."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "docs" / "examples").glob("*.py")])
# ``from ultimate_jobs[.module] import a, b as c`` on one line, or a parenthesised list over several.
FROM_IMPORT = re.compile(r"from\s+(ultimate_jobs(?:\.\w+)*)\s+import\s+(\([^)]*\)|[\w ,]+)")
MODULE_IMPORT = re.compile(r"^\s*import\s+(ultimate_jobs(?:\.\w+)*)", flags=re.MULTILINE)


def shown_imports() -> list[tuple[str, str, str | None]]:
    """``(page, module, name)`` for each import the docs show; ``name`` None for ``import module``."""
    found: list[tuple[str, str, str | None]] = []
    for path in DOCS:
        text = path.read_text()
        page = str(path.relative_to(ROOT))
        for module, names in FROM_IMPORT.findall(text):
            for part in names.strip("()").replace("\n", " ").split(","):
                name = part.split(" as ")[0].strip()
                if name and not name.startswith("#"):
                    found.append((page, module, name))
        found += [(page, module, None) for module in MODULE_IMPORT.findall(text)]
    return found


def test_the_docs_show_imports_of_the_public_names() -> None:
    shown = shown_imports()
    assert ("docs/reference/consumer.md", "ultimate_jobs", "get_job_handle") in shown
    assert len({module for _, module, _ in shown}) >= 5, shown


def test_every_import_the_docs_show_resolves() -> None:
    broken = []
    for page, module, name in shown_imports():
        try:
            imported = importlib.import_module(module)
            if name is not None and not hasattr(imported, name):
                importlib.import_module(f"{module}.{name}")  # a submodule: from ultimate_jobs import ops
        except ImportError as exc:
            broken.append(f"{page}: from {module} import {name} -> {exc}")
    assert not broken, "\n".join(broken)
