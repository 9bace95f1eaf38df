"""Error codes travel only as the constants ``ultimate_jobs/errors.py`` registers: a code spelled as a
string literal elsewhere would survive a rename of the constant, and a typo in it would only show
when the error is raised."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "ultimate_jobs"
CODE = re.compile(r"^X_[A-Z0-9_]+$")


def code_literals() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "errors.py" or "migrations" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and CODE.match(node.value):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {node.value!r}")
    return found


def test_no_error_code_is_a_string_literal_outside_errors_py() -> None:
    assert code_literals() == [], "import the constant from ultimate_jobs.errors instead"
