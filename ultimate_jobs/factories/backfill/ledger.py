"""Internal: reading and writing the backfill ledger (``BackfillRun``), on the jobs database.

Every write is keyed by the run (``run_id``) and sets absolute values (rows so far, batches so
far, the cursor), so a page that runs twice after a crash writes the same numbers again rather
than counting twice. A failure's text is redacted (``ultimate_jobs.redact``) before it is written:
a ``source`` or ``handle`` error often quotes a connection string or a row.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.db.models import QuerySet

from ultimate_jobs import clock
from ultimate_jobs.conf import get_settings
from ultimate_jobs.models import BackfillRun
from ultimate_jobs.redact import redact_text


class Ledger:
    def __init__(self, database: str | None = None) -> None:
        self.alias = database or get_settings().DATABASE

    @property
    def rows(self) -> QuerySet[BackfillRun]:
        return BackfillRun.objects.using(self.alias)

    def get(self, run_id: UUID) -> BackfillRun | None:
        return self.rows.filter(run_id=run_id).first()

    def newest_completed(self, name: str, *, exclude_run: UUID | None = None) -> BackfillRun | None:
        rows = self.rows.filter(name=name, status="completed")
        if exclude_run is not None:
            rows = rows.exclude(run_id=exclude_run)
        return rows.order_by("-completed_at", "-started_at").first()

    def open(self, *, run_id: UUID, job_id: UUID, name: str, checksum: str, tenant_id: str | None, forced: bool,
             previous_run_id: UUID | None) -> None:
        """Start the run's row, or adopt it on a retry: ``started_at`` stays when the pass began."""
        now = clock.now()
        adopted = self.rows.filter(run_id=run_id).update(
            status="running", job_id=job_id, checksum=checksum, completed_at=None, error_code=None, last_error=None,
            updated_at=now)
        if not adopted:
            self.rows.create(run_id=run_id, name=name, job_id=job_id, status="running", checksum=checksum,
                             environment=get_settings().ENVIRONMENT, tenant_id=tenant_id, forced=forced,
                             previous_run_id=previous_run_id, started_at=now, updated_at=now)

    def progress(self, run_id: UUID, *, rows: int, batches: int, cursor: Any) -> None:
        self.rows.filter(run_id=run_id).update(rows=rows, batches=batches, last_cursor=cursor,
                                               updated_at=clock.now())

    def complete(self, run_id: UUID, *, rows: int, batches: int, cursor: Any) -> None:
        now = clock.now()
        self.rows.filter(run_id=run_id).update(status="completed", rows=rows, batches=batches, last_cursor=cursor,
                                               completed_at=now, updated_at=now)

    def fail(self, run_id: UUID, *, code: str, error: str) -> None:
        text = (redact_text(error) or "")[:4000].replace("\x00", "\\x00")
        self.rows.filter(run_id=run_id).update(status="failed", error_code=code, last_error=text,
                                               updated_at=clock.now())

    def newest(self, names: list[str] | None = None) -> tuple[dict[str, BackfillRun], dict[str, BackfillRun]]:
        """Per name (all, or ``names``): the newest row, and the newest completed row; one read."""
        rows = self.rows if names is None else self.rows.filter(name__in=names)
        newest: dict[str, BackfillRun] = {}
        completed: dict[str, BackfillRun] = {}
        for row in rows.order_by("name", "-started_at"):
            newest.setdefault(row.name, row)
            if row.status == "completed":
                completed.setdefault(row.name, row)
        return newest, completed
