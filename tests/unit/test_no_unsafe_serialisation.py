"""Stored data is JSON only: the package never imports a pickle-family module or evaluates text."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "ultimate_jobs"
FORBIDDEN_MODULES = {"pickle", "cPickle", "marshal", "shelve", "dill", "cloudpickle"}
FORBIDDEN_CALLS = {"eval", "exec"}


def _offences(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name.split(".")[0] in FORBIDDEN_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in FORBIDDEN_MODULES:
            found.append(f"from {node.module} import ...")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
            found.append(f"{node.func.id}(...)")
    return [f"{path.relative_to(PACKAGE.parent)}:{o}" for o in found]


def test_package_never_uses_pickle_marshal_shelve_dill_or_eval() -> None:
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 10
    offences = [o for f in files for o in _offences(f)]
    assert offences == []


def test_the_scan_would_catch_an_offence(tmp_path: Path) -> None:
    bad = PACKAGE / "_scan_probe.py"
    try:
        bad.write_text("import pickle\nfrom dill import loads\neval('1')\n")
        assert len(_offences(bad)) == 3
    finally:
        bad.unlink()
