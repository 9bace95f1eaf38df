"""The house's rules, checked: no import cycle anywhere in the package (type-only imports aside),
and no module or class past its size limit. The layer contracts run in `make lint` (lint-imports)."""

from __future__ import annotations

import ast
from pathlib import Path

import grimp

PACKAGE = Path(__file__).resolve().parents[2] / "ultimate_jobs"
MAX_MODULE_LINES = 500
MAX_CLASS_LINES = 300


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), over every import."""
    graph = grimp.build_graph("ultimate_jobs", exclude_type_checking_imports=True)
    modules = sorted(graph.modules)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in modules:
        if module not in index:
            visit(module)
    return found


def test_no_import_cycles() -> None:
    assert _cycles() == []


def _sources() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "migrations" not in p.parts)


def test_every_module_is_at_most_500_lines() -> None:
    sizes = {str(p.relative_to(PACKAGE)): len(p.read_text().splitlines()) for p in _sources()}
    assert {path: n for path, n in sizes.items() if n > MAX_MODULE_LINES} == {}


def test_every_class_is_at_most_300_lines() -> None:
    long = {}
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and (n := node.end_lineno - node.lineno + 1) > MAX_CLASS_LINES:
                long[f"{path.relative_to(PACKAGE)}:{node.name}"] = n
    assert long == {}


def test_median_module_is_at_most_200_lines() -> None:
    sizes = sorted(len(p.read_text().splitlines()) for p in _sources())
    assert sizes[len(sizes) // 2] <= 200
