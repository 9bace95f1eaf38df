"""Helpers for the durable-run tests (in-process, on PostgreSQL and SQLite)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.app.models import Effect
from ultimate_jobs.db import store_for


def effect_keys(prefix: str = "") -> list[str]:
    """Every ``Effect`` key starting with ``prefix``, in the order the effects happened."""
    return list(Effect.objects.filter(key__startswith=prefix).order_by("id").values_list("key", flat=True))


@pytest.fixture
def step_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Records each ``store.step_list`` call (the one read a replay starts from)."""
    calls: list[Any] = []
    store_type = type(store_for())
    original: Callable[..., Any] = store_type.step_list

    def spy(self: Any, **kwargs: Any) -> Any:
        calls.append(kwargs["run_id"])
        return original(self, **kwargs)

    monkeypatch.setattr(store_type, "step_list", spy)
    yield calls
