"""The ``Store`` contract: every method called directly, on PostgreSQL and SQLite in one run.

Like River's ``riverdrivertest``: one ``store`` fixture over both database aliases
(``tests/settings.py`` ``CONTRACT_ALIASES``), tests that plant rows, call one method and assert
on the ids, states and counts they planted, fencing outcomes included. ``@covers(...)`` records
which methods a test exercises; ``test_completeness.py`` fails when a ``Store`` method has none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable[..., object])

COVERED: set[str] = set()


def covers(*methods: str) -> Callable[[F], F]:
    """Record that the decorated test calls ``methods`` of the store."""

    def register(test: F) -> F:
        COVERED.update(methods)
        return test

    return register
