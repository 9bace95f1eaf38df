"""Internal: materialized views on SQLite — there are none, so both methods refuse."""

from __future__ import annotations

from typing import NoReturn

from ultimate_jobs.db.sqlite.connection import SqliteConnection
from ultimate_jobs.errors import X_JOB_REFRESH_VIEW_INVALID, JobsError


class ViewStatements(SqliteConnection):
    """``view_describe`` and ``view_refresh``: SQLite has no materialized view to refresh."""

    def view_describe(self, *, name: str) -> NoReturn:
        raise _refusal(name)

    def view_refresh(self, *, name: tuple[str, str], concurrently: bool) -> NoReturn:
        raise _refusal(".".join(name))


def _refusal(name: str) -> JobsError:
    return JobsError(X_JOB_REFRESH_VIEW_INVALID, f"{name!r}: SQLite has no materialized views.",
                     "Refresh views on PostgreSQL; on SQLite compute the table in a job of your own.")
