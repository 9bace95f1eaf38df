"""Internal: how rows become the plain, JSON-ready dicts the operator API answers.

Shared by ``ops`` (reads), ``actions`` (writes on jobs), ``queues`` and ``doctor``: the field
lists, the ISO 8601 timestamps, the redaction of payloads, results and errors, and the ``now``
every operator write uses (the database's clock on PostgreSQL unless a test froze the clock).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import connections
from django.db.models import Q, QuerySet
from django.db.models.functions import Now

from ultimate_jobs import clock
from ultimate_jobs.conf import get_settings
from ultimate_jobs.errors import X_ID_INVALID, X_JOB_INPUT_INVALID, JobsError
from ultimate_jobs.jsoncodec import plain
from ultimate_jobs.models import Job
from ultimate_jobs.models.jobs import STATES, JobQuerySet
from ultimate_jobs.names import TASK_JOB
from ultimate_jobs.redact import redact, redact_text
from ultimate_jobs.registry import get_job_handle

_HEX_PREFIX = re.compile(r"^[0-9a-f-]{1,36}\Z")  # \Z: $ would pass a trailing newline

ROW_FIELDS = (
    "id", "run_id", "name", "queue", "priority", "state", "payload", "idempotency_key", "tenant_id",
    "enqueued_by", "attempt", "max_attempts", "run_at", "visible_at", "claimed_by", "concurrency_key", "progress",
    "result", "last_error", "error_code", "stop_reason", "created_at", "started_at", "finished_at", "updated_at",
    "sensitive",
)
LIST_FIELDS = tuple(f for f in ROW_FIELDS if f not in ("result",))


_ON: ContextVar[str | None] = ContextVar("ultimate_jobs_ops_database", default=None)


def alias() -> str:
    """The database ops reads and writes: ``DATABASE``, or the one ``on_database`` chose
    (``ops.routes``: the database a routed queue's jobs live on)."""
    return _ON.get() or get_settings().DATABASE


def pinned() -> bool:
    """Whether a caller chose the database (``on_database``): a routed ``ops`` call inside it runs
    there rather than choosing again."""
    return _ON.get() is not None


@contextmanager
def on_database(database: str) -> Iterator[None]:
    token = _ON.set(database)
    try:
        yield
    finally:
        _ON.reset(token)


def jobs() -> JobQuerySet:
    """The ``Job`` queryset on the jobs database."""
    return Job.objects.using(alias())


def write_now() -> datetime | Now:
    """The ``now`` an operator write stores: the frozen test time, else the database's clock on
    PostgreSQL (so a web host with a skewed clock cannot push a retried job into the future), and
    the process clock on SQLite (as the SQLite store does)."""
    frozen = clock.sql_now()
    if frozen is not None:
        return frozen
    if connections[alias()].vendor == "postgresql":
        return Now()
    return clock.now()


def filter_jobs(query: QuerySet[Job], **equal: str | None) -> QuerySet[Job]:
    """``query`` narrowed by the operator filters that are set (``state``, ``queue``, ``name``,
    ``tenant_id``); an unknown state is ``X_JOB_INPUT_INVALID``. Shared by listing and bulk writes.
    ``name`` also matches a Django task by its module path (``name_match``)."""
    state = equal.get("state")
    if state is not None and state not in STATES:
        raise JobsError(X_JOB_INPUT_INVALID, f"state={state!r} is not one of {', '.join(STATES)}.")
    name = equal.pop("name", None)
    if name is not None:
        query = query.filter(name_match(name))
    return query.filter(**{field: value for field, value in equal.items() if value is not None})


def name_match(name: str) -> Q:
    """The jobs a name filter means: that job name, or — for a name no job in this process is
    declared under — the Django tasks of that module path too (every task is a row of the one job
    ``django_tasks``, its path in the input)."""
    if name == TASK_JOB or get_job_handle(name) is not None:
        return Q(name=name)
    return Q(name=name) | Q(name=TASK_JOB, payload__task=name)


def task_path(name: str, payload: object) -> str | None:
    """A Django task's module path for a ``django_tasks`` row (read from its input); else None."""
    if name != TASK_JOB or not isinstance(payload, Mapping):
        return None
    path = payload.get("task")
    return path if isinstance(path, str) else None


def shape(row: Mapping[str, Any]) -> dict[str, Any]:
    """A job row as ops answers it: plain values, redacted payload, result and error."""
    handle = get_job_handle(row["name"])
    # The row's own flag first: this process may never have imported the declaration (SPEC §10).
    sensitive = bool(row.get("sensitive")) or bool(handle and handle.sensitive)
    out = {key: plain(value) for key, value in row.items()}
    out["payload"] = redact(out.get("payload"), sensitive=sensitive)
    if "result" in out:
        out["result"] = redact(out["result"], sensitive=sensitive)
    out["last_error"] = redact_text(out.get("last_error"))
    if row["state"] == "done":  # no current failure (SPEC §10); a row settled before the settle cleared
        out["last_error"] = out["error_code"] = None  # them may still hold its earlier one: see attempts
    out["next_retry_at"] = (out["run_at"] if row["state"] in ("ready", "delayed") and row["attempt"] > 0
                            else None)
    out["sensitive"] = sensitive
    out["task"] = task_path(row["name"], row.get("payload"))
    return out


def is_id_prefix(text: str) -> bool:
    return bool(_HEX_PREFIX.match(text.strip().lower()))


def id_prefix_range(prefix: str) -> tuple[UUID, UUID]:
    """The primary-key range of ids starting with ``prefix`` (hex, dashes optional); raise
    ``X_ID_INVALID`` for anything else. A range, so the lookup walks the primary key index."""
    text = prefix.strip().lower()
    if not _HEX_PREFIX.match(text):
        raise JobsError(X_ID_INVALID, f"id_prefix={prefix!r} is not the start of a UUID.")
    digits = text.replace("-", "")[:32]
    return UUID(digits.ljust(32, "0")), UUID(digits.ljust(32, "f"))
