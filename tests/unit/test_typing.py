"""The public API is typed for users: mypy reads tests/typing/usage.py as a user's code would,
and says on each line what the ``# expect:`` comment above it names (a revealed type, or the error).

An ``…`` in an expectation stands for any text: mypy spells some types differently across releases
(``JobHandle[[*Any, **Any], R]`` in 1.x is ``JobHandle[..., R]`` in 2.x)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api")

ROOT = Path(__file__).resolve().parents[2]
USAGE = ROOT / "tests" / "typing" / "usage.py"


def test_mypy_reads_the_public_api_as_the_usage_file_expects() -> None:
    stdout, stderr, _ = mypy_api.run([str(USAGE), "--config-file", str(ROOT / "pyproject.toml"),
                                      "--hide-error-context", "--no-error-summary", "--show-absolute-path"])
    said: dict[int, list[str]] = {}
    for line in stdout.splitlines():
        found = re.match(r"^(.*?):(\d+): (?:error|note): (.*)$", line)
        if found and Path(found.group(1)) == USAGE:
            said.setdefault(int(found.group(2)), []).append(found.group(3))
    lines = USAGE.read_text().splitlines()
    expected = {n + 1: text.split("# expect: ", 1)[1] for n, text in enumerate(lines, 1)
                if text.startswith("# expect: ")}
    assert expected, "the usage file expects nothing"
    for number, want in expected.items():
        pattern = re.compile(".*?".join(re.escape(part) for part in want.split("…")))
        assert any(pattern.search(message) for message in said.get(number, [])), (
            f"usage.py:{number}: mypy did not say {want!r}; it said {said.get(number)}\n{stdout}{stderr}")
    unexpected = {n: m for n, m in said.items() if n not in expected}
    assert not unexpected, f"mypy said more than usage.py expects: {unexpected}"
