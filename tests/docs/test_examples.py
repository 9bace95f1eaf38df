"""Every ``docs/examples/*.py`` runs as a script and prints exactly its trailing ``# Output:`` block.

The examples are the runnable half of the docs (docs/reference/*.md point at them), so a change
in behaviour that makes one print something else fails here, next to the page that describes it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "docs" / "examples").glob("*.py"))
MARKER = "# Output:"


def expected_output(path: Path) -> str:
    """The comment block after the last ``# Output:`` line, with the ``# `` prefixes removed."""
    lines = path.read_text().splitlines()
    if MARKER not in lines:
        raise AssertionError(f"{path.name} has no '{MARKER}' block")
    block = lines[len(lines) - lines[::-1].index(MARKER):]
    out = []
    for line in block:
        if line != "#" and not line.startswith("# "):
            raise AssertionError(f"{path.name}: the output block may hold only comment lines, found {line!r}")
        out.append(line[2:])
    return "\n".join(out).rstrip()


def test_there_are_examples() -> None:
    assert len(EXAMPLES) >= 10, EXAMPLES


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_prints_its_output_block(path: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["TMPDIR"] = str(tmp_path)
    proc = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", str(path)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, f"{path.name} exited {proc.returncode}\n--- stderr ---\n{proc.stderr}"
    actual = "\n".join(line.rstrip() for line in proc.stdout.splitlines()).rstrip()
    assert actual == expected_output(path), f"{path.name} printed other output\n--- stderr ---\n{proc.stderr}"
