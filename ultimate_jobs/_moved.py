"""Internal: module paths that earlier releases documented, kept importable after the move.

``import ultimate_jobs.retention`` answers the very module ``ultimate_jobs.factories.retention``
(one module object under two names, so monkeypatching either reaches the same code). The table is
closed: new code imports the new paths, and ``tests/unit/test_public_api.py`` pins every row.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType

# documented before 0.2 -> where it lives now
MOVED: dict[str, str] = {
    "ultimate_jobs.backfills": "ultimate_jobs.factories.backfill.declaration",
    "ultimate_jobs.metrics": "ultimate_jobs.ops.metrics",
    "ultimate_jobs.purges": "ultimate_jobs.factories.purge",
    "ultimate_jobs.retention": "ultimate_jobs.factories.retention",
    "ultimate_jobs.tasks_ops": "ultimate_jobs.ops.schedule",
}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self) -> None:
        self.own_specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def find_spec(self, fullname: str, path: object = None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        if fullname in MOVED:
            return importlib.machinery.ModuleSpec(fullname, self)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(MOVED[spec.name])
        self.own_specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The module ran when it was imported under its own name; importlib has just stamped the
        # alias's spec on it, so give it back its own.
        spec = module.__spec__
        assert spec is not None  # importlib set it on the module just before calling this
        module.__spec__ = self.own_specs.pop(spec.name)


def install() -> None:
    if not any(isinstance(finder, _Alias) for finder in sys.meta_path):
        sys.meta_path.append(_Alias())
