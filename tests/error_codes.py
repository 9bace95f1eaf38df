"""Which registered error codes the suite proves are raised, and the helper refusal tests use.

Two halves, one idea (a code counts only when a test asserts it):

* ``refused(code)`` — a context manager for refusal tests: the block must raise a ``JobsError``
  with exactly ``code``, and no row of any table may have been added, removed or changed in count
  (every model of ``ultimate_jobs`` and of the test app). It answers the error for further checks.
* ``asserted_codes()`` — a static scan of ``tests/**/test_*.py``: for each test function, the
  registered codes that appear inside an ``assert``, a ``pytest.raises(...)`` call (its ``match=``),
  a ``refused(...)`` call (or a module's own ``_refused``/``assert_refused`` helper) or a
  ``wait_for(...)`` (which fails the test when unmet) — a code a test merely mentions does not count.
  ``scripts/gen_error_docs.py``
  writes its answer into ``docs/reference/errors.md``; ``tests/unit/test_every_code_raised.py``
  fails when a registered code has no test.

This module imports Django only inside ``refused``, so the generator can scan without settings.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
CODE_IN_TEXT = re.compile(r"X_[A-Z][A-Z0-9_]*[A-Z0-9]")
ASSERTING_CALLS = {"raises", "refused", "_refused", "assert_refused", "wait_for"}  # wait_for fails when unmet


# -- runtime: the helper -------------------------------------------------------------------------

def row_counts() -> dict[str, int]:
    """The row count of every table the package and the test app own, on the default database."""
    from django.apps import apps

    counts: dict[str, int] = {}
    for label in ("ultimate_jobs", "testapp"):
        try:
            config = apps.get_app_config(label)
        except LookupError:
            continue
        for model in config.get_models():
            counts[model._meta.label] = model._default_manager.count()
    return counts


class Refusal:
    """What ``refused`` caught: ``.error`` once the block has raised."""

    error: Any = None


@contextmanager
def refused(code: str, *, writes: bool = False) -> Iterator[Refusal]:
    """Assert the block raises ``JobsError`` with ``code`` and writes nothing (``writes=True``
    skips the row check, for a refusal that by design leaves a record, e.g. a dead-lettered row)."""
    from ultimate_jobs import JobsError
    from ultimate_jobs.errors import CODES

    assert code in CODES, f"{code} is not a registered error code"
    caught = Refusal()
    before = None if writes else row_counts()
    try:
        yield caught
    except JobsError as err:
        caught.error = err
        assert err.code == code, f"expected {code}, got {err.code}: {err}"
    else:
        raise AssertionError(f"expected a JobsError {code}; nothing was raised")
    if before is not None:
        after = row_counts()
        changed = {table: (before[table], after.get(table)) for table in before if before[table] != after.get(table)}
        assert not changed, f"{code} refusal wrote rows (table: before, after): {changed}"


# -- static: which test asserts which code -------------------------------------------------------

def _call_name(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def _codes_in(node: ast.AST) -> set[str]:
    found: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            found.update(CODE_IN_TEXT.findall(sub.value))
        elif isinstance(sub, ast.Name) and CODE_IN_TEXT.fullmatch(sub.id):
            found.add(sub.id)
        elif isinstance(sub, ast.Attribute) and CODE_IN_TEXT.fullmatch(sub.attr):
            found.add(sub.attr)
    return found


def _asserted_in(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    found: set[str] = set()
    asserts = False
    for node in ast.walk(function):
        if isinstance(node, ast.Assert):
            asserts = True
            found |= _codes_in(node)
        elif isinstance(node, ast.Call) and _call_name(node) in ASSERTING_CALLS:
            asserts = True
            found |= _codes_in(node)
    if asserts:  # a parametrized test's codes count when its body asserts
        for decorator in function.decorator_list:
            if isinstance(decorator, ast.Call) and _call_name(decorator) == "parametrize":
                found |= _codes_in(decorator)
    return found


def _test_functions(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            yield node.name, node
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name.startswith("test"):
                    yield f"{node.name}::{item.name}", item


def asserted_codes(registered: set[str] | None = None, root: Path = TESTS) -> dict[str, list[str]]:
    """``{code: ["tests/path.py::test_name", ...]}`` for every registered code some test asserts."""
    if registered is None:
        from ultimate_jobs.errors import CODES

        registered = set(CODES)
    by_code: dict[str, list[str]] = {}
    for path in sorted(root.rglob("test_*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        relative = path.relative_to(root.parent).as_posix()
        for name, function in _test_functions(tree):
            for code in sorted(_asserted_in(function) & registered):
                by_code.setdefault(code, []).append(f"{relative}::{name}")
    return by_code


# -- the cross-check: which codes each test really raised (``--error-codes-report=PATH``) -----------

def pytest_addoption(parser: Any) -> None:
    parser.addoption("--error-codes-report", default=None, metavar="PATH",
                     help="write {test: [codes of every JobsError built while it ran]} as JSON to PATH, and "
                          "print the codes the static scan credits to a test that ran without building them")


class _Recorder:
    """Wraps ``JobsError.__init__`` while a test runs; keeps the codes built, per test id."""

    def __init__(self) -> None:
        self.seen: dict[str, set[str]] = {}
        self.current: set[str] | None = None

    def install(self) -> None:
        from ultimate_jobs.errors import JobsError

        original = JobsError.__init__
        recorder = self

        def recording_init(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            if recorder.current is not None:
                recorder.current.add(self.code)

        JobsError.__init__ = recording_init  # type: ignore[method-assign]


_RECORDER = _Recorder()


def pytest_configure(config: Any) -> None:
    if config.getoption("--error-codes-report", default=None):
        _RECORDER.install()


def pytest_runtest_setup(item: Any) -> None:
    if item.config.getoption("--error-codes-report", default=None):
        _RECORDER.current = _RECORDER.seen.setdefault(item.nodeid.split("[")[0], set())


def pytest_runtest_teardown(item: Any) -> None:
    _RECORDER.current = None


def pytest_terminal_summary(terminalreporter: Any, config: Any) -> None:
    path = config.getoption("--error-codes-report", default=None)
    if not path:
        return
    import json

    Path(path).write_text(json.dumps({test: sorted(codes) for test, codes in sorted(_RECORDER.seen.items())},
                                     indent=1))
    ran = set(_RECORDER.seen)
    unseen = [(code, test) for code, tests in asserted_codes().items() for test in tests
              if test in ran and code not in _RECORDER.seen[test]]
    terminalreporter.write_line(f"error codes: {len(ran)} tests recorded in {path}; {len(unseen)} static "
                                "credit(s) not seen in-process (a code stored by SQL or raised in a "
                                "subprocess is expected here):")
    for code, test in sorted(unseen):
        terminalreporter.write_line(f"  {code}  {test}")
