"""Internal: how one attempt ended, as the runtime keeps it — the store's ``Settlement`` (pure data,
what the settle statement writes) paired with what runs once that statement answered that the row
settled (``on_settled``, an event wait's re-check). Only the settler runs ``after``
(``runtime/settling.py``): once, for a row the statement reports settled, never for a lost one."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from ultimate_jobs.db import Settlement


class Outcome(NamedTuple):
    """``settlement`` to send, and ``after`` to run once it landed (None: nothing waits for it)."""

    settlement: Settlement
    after: Callable[[], object] | None = None


def plain(settlement: Settlement | None) -> Outcome | None:
    """``settlement`` with nothing waiting for it (None stays None: nothing to settle)."""
    return None if settlement is None else Outcome(settlement)
