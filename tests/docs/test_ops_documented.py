"""Every public ``ops`` function is in ``ops.__all__`` (sorted) and documented in docs/reference/ops.md."""

from __future__ import annotations

import inspect
from pathlib import Path

from ultimate_jobs import ops

OPS_MD = (Path(__file__).resolve().parents[2] / "docs" / "reference" / "ops.md").read_text()


def test_all_is_sorted_and_complete() -> None:
    assert ops.__all__ == sorted(ops.__all__)
    functions = {n for n, v in vars(ops).items()
                 if inspect.isfunction(v) and not n.startswith("_") and v.__module__.startswith("ultimate_jobs.ops")}
    assert functions <= set(ops.__all__), functions - set(ops.__all__)


def test_every_ops_name_is_documented() -> None:
    missing = [name for name in ops.__all__ if f"`{name}" not in OPS_MD and f"ops.{name}" not in OPS_MD]
    assert not missing, f"ops names missing from docs/reference/ops.md: {missing}"
