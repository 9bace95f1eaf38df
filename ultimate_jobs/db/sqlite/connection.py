"""Internal: the SQLite store's connection (Django's, on one alias) and how values are stored there."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, overload
from uuid import UUID


@overload
def ts(value: datetime) -> str: ...
@overload
def ts(value: None) -> None: ...
def ts(value: datetime | None) -> str | None:
    """A timestamp as Django's SQLite backend stores it: naive UTC text with microseconds."""
    if value is None:
        return None
    return value.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")


def text_ts(value: str | datetime) -> str:
    """A stored timestamp as comparable text (Django's converters may hand back a naive UTC datetime)."""
    if isinstance(value, datetime):
        return ts(value if value.tzinfo else value.replace(tzinfo=UTC)) or ""
    return value


def parse_ts(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value if value is None or value.tzinfo else value.replace(tzinfo=UTC)
    return datetime.fromisoformat(value).replace(tzinfo=UTC)


def named_rows(cursor: Any) -> list[dict[str, Any]]:
    """The answer rows by column name (the RETURNING / SELECT names), never read by position."""
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def as_uuid(value: Any) -> UUID:
    return value if isinstance(value, UUID) else UUID(value)


def aware(value: Any) -> datetime:
    """A timestamp read back from raw SQL (naive UTC text) as an aware datetime."""
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return datetime.fromisoformat(value).replace(tzinfo=UTC)


class SqliteConnection:
    """What every statement of the SQLite store runs on: a Django connection alias."""

    supports_listen_notify = False

    def __init__(self, alias: str) -> None:
        from django.db import connections

        self.alias = alias
        self._connections = connections

    def _cursor(self) -> Any:
        return self._connections[self.alias].cursor()

    def _atomic(self) -> Any:
        from django.db import transaction

        return transaction.atomic(using=self.alias)

    def listen(self, *, channel: str, on_wake: Callable[[str], None], queues: Iterable[str] = ()) -> None:
        """SQLite has no LISTEN: workers and relays poll."""
