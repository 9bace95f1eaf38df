"""Every error code is registered once and documented: the code, the registry and
docs/reference/errors.md agree in both directions."""

from __future__ import annotations

import re
from pathlib import Path

from ultimate_jobs.errors import CODES

ROOT = Path(__file__).resolve().parents[2]
ERRORS_MD = ROOT / "docs" / "reference" / "errors.md"
DOC = "docs/reference/errors.md"
CODE = re.compile(r"\bX_[A-Z][A-Z0-9_]*[A-Z0-9]\b")


def codes_in_source() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "ultimate_jobs").rglob("*.py")):
        for code in CODE.findall(path.read_text()):
            found.setdefault(code, set()).add(str(path.relative_to(ROOT)))
    return found


def documented_codes() -> set[str]:
    """Codes that head a row of the table in errors.md (``| `X_...` | ...``)."""
    return set(re.findall(r"^\|\s*`(X_[A-Z0-9_]+)`\s*\|", ERRORS_MD.read_text(), flags=re.MULTILINE))


def test_every_code_in_the_source_is_registered() -> None:
    unregistered = {code: where for code, where in codes_in_source().items() if code not in CODES}
    assert not unregistered, f"codes used but not registered in ultimate_jobs/errors.py: {unregistered}"


def test_every_registered_code_is_documented() -> None:
    missing = sorted(set(CODES) - documented_codes())
    assert not missing, f"codes registered but missing from the table in {DOC}: {missing}"


def test_every_documented_code_exists() -> None:
    stale = sorted(documented_codes() - set(CODES))
    assert not stale, f"codes documented in {DOC} but not registered: {stale}"


def test_every_code_in_the_source_is_documented() -> None:
    missing = sorted(set(codes_in_source()) - documented_codes())
    assert not missing, f"codes used in ultimate_jobs/ but missing from {DOC}: {missing}"
