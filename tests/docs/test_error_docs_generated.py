"""The generated section of docs/reference/errors.md ("Which test raises each code") is not stale:
every registered code has its line, every test it names exists and still asserts that code, and a
code shown without a test really has none (scripts/gen_error_docs.py rewrites the section)."""

from __future__ import annotations

import re

from scripts.gen_error_docs import BEGIN, END, ERRORS_MD
from tests.error_codes import asserted_codes
from ultimate_jobs.errors import CODES

LINE = re.compile(r"^- `(X_[A-Z0-9_]+)`: (.*)$", re.MULTILINE)
FIX = "stale: run `.venv/bin/python scripts/gen_error_docs.py`"


def generated() -> dict[str, list[str]]:
    page = ERRORS_MD.read_text()
    assert BEGIN in page and END in page, f"the generated section is missing from {ERRORS_MD.name}: {FIX}"
    block = page.split(BEGIN, 1)[1].split(END, 1)[0]
    return {code: re.findall(r"`([^`]+::[^`]+)`", rest) for code, rest in LINE.findall(block)}


def test_every_registered_code_has_a_line_and_no_other_code_does() -> None:
    listed = generated()
    assert sorted(set(CODES) - set(listed)) == [], FIX
    assert sorted(set(listed) - set(CODES)) == [], FIX


def test_every_named_test_still_asserts_its_code() -> None:
    actual = asserted_codes(set(CODES))
    wrong = {code: sorted(set(tests) - set(actual.get(code, []))) for code, tests in generated().items()}
    assert {code: tests for code, tests in wrong.items() if tests} == {}, FIX


def test_a_code_shown_without_a_test_has_none() -> None:
    actual = asserted_codes(set(CODES))
    untested_but_covered = sorted(code for code, tests in generated().items() if not tests and code in actual)
    assert untested_but_covered == [], FIX
