"""What was declared against what the ledger recorded: ``pending_backfills()``, and the gate one
backfill passes before ``jobs_backfill --write`` enqueues it (``gate_backfill``).

Usage::

    from ultimate_jobs import pending_backfills
    from ultimate_jobs.factories.backfill.status import gate_backfill, enqueue_backfill

    report = pending_backfills()
    report["pending"]                    # ["rewrite-slugs"]: declared and not swept
    verdict = gate_backfill("rewrite-slugs")
    verdict["verdict"], verdict["rows"]  # "run", 1204 (a dry run: nothing written)
    enqueue_backfill("rewrite-slugs")    # what --write does

A backfill's state is, in this order: ``excluded`` (the ``ENVIRONMENT`` setting is not in its
``environments``), ``running`` (its newest pass's job is live: claimed, waiting or retrying),
``completed`` (a completed pass exists: nothing re-runs without ``force``), ``failed`` (the
newest pass stopped without completing: dead, cancelled, stalled, or its worker died and the job
is gone), ``pending`` (declared, never run). ``pending`` and ``failed`` are what
``pending_backfills()["pending"]`` lists and what makes ``jobs_backfill --pending`` exit 1.
"""

from __future__ import annotations

from typing import Any

from ultimate_jobs.conf import get_settings
from ultimate_jobs.context import CancelToken, JobContext
from ultimate_jobs.enqueue import submit
from ultimate_jobs.errors import X_BACKFILL_ENVIRONMENT, X_BACKFILL_MIGRATION_PENDING, X_BACKFILL_NOT_FOUND, JobsError
from ultimate_jobs.factories.backfill.declaration import Backfill, get_backfill, registered_backfills
from ultimate_jobs.factories.backfill.ledger import Ledger
from ultimate_jobs.factories.backfill.sweep import environment_refusal, migration_applied, parse_count, read_source
from ultimate_jobs.jsoncodec import plain
from ultimate_jobs.models import Job
from ultimate_jobs.models.jobs import LIVE_STATES

UNSWEPT = ("pending", "failed")


def pending_backfills(*, database: str | None = None) -> dict[str, Any]:
    """Every declared backfill with its state; answer ``{"environment", "backfills", "pending",
    "orphaned"}`` (``orphaned``: names in the ledger that nothing declares any more)."""
    declarations = registered_backfills()
    newest, rows = _states(declarations, Ledger(database), names=None)
    names = {declared.name for declared in declarations}
    return {"environment": get_settings().ENVIRONMENT, "backfills": rows,
            "pending": [row["name"] for row in rows if row["state"] in UNSWEPT],
            "orphaned": sorted(set(newest) - names)}


def _states(declarations: list[Backfill], ledger: Ledger,
            names: list[str] | None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The ledger's newest rows (of ``names``, or all) and each declaration's report row."""
    environment = get_settings().ENVIRONMENT
    newest, completed = ledger.newest(names)
    live = set(Job.objects.using(ledger.alias).filter(
        name__in=[d.name for d in declarations], state__in=LIVE_STATES).values_list("name", flat=True).distinct())
    rows = []
    for declared in declarations:
        row = newest.get(declared.name)
        done = completed.get(declared.name)
        if environment_refusal(declared, environment) is not None:
            state = "excluded"
        elif declared.name in live:  # queued, claimed, or waiting to retry
            state = "running"
        elif done is not None:
            state = "completed"
        else:
            state = "pending" if row is None else "failed"
        rows.append({**declared.describe(), "state": state,
                     "checksum_moved": done is not None and done.checksum != declared.checksum,
                     "last_run": _run(row), "completed_run": _run(done)})
    return newest, rows


def gate_backfill(name: str, *, force: bool = False, count_rows: bool = True,
                  database: str | None = None) -> dict[str, Any]:
    """Whether ``--write`` would enqueue ``name``, as a verdict; nothing is written.

    ``verdict`` is ``run`` (it would sweep), ``running`` (a pass is live: an enqueue joins it),
    ``completed`` (done before; ``force=True`` sweeps again) or ``refused`` (``code`` says why:
    ``X_BACKFILL_ENVIRONMENT``, ``X_BACKFILL_MIGRATION_PENDING``). ``rows`` is how many rows the
    pass would visit now (``count``, else the source counted), or None when not counted.
    Raise ``X_BACKFILL_NOT_FOUND`` for a name no backfill declares.
    """
    declared = require_backfill(name)
    (report,) = _states([declared], Ledger(database), names=[name])[1]
    verdict: dict[str, Any] = {"name": name, "state": report["state"], "force": force, "code": None, "reason": None,
                               "rows": None, "checksum_moved": report["checksum_moved"],
                               "last_run": report["last_run"], "completed_run": report["completed_run"]}
    refusal = environment_refusal(declared, get_settings().ENVIRONMENT)
    ctx = dry_run_context(declared)
    if refusal is not None:
        return {**verdict, "verdict": "refused", "code": X_BACKFILL_ENVIRONMENT, "reason": refusal}
    source = read_source(declared, ctx)
    if declared.requires is not None and not migration_applied(declared.requires, source.db):
        return {**verdict, "verdict": "refused", "code": X_BACKFILL_MIGRATION_PENDING,
                "reason": f"the migration {declared.requires} is not applied to the database {source.db!r}"}
    if count_rows:
        verdict["rows"] = parse_count(declared, declared.count(ctx)) if declared.count else source.count()
    if report["state"] == "running":
        return {**verdict, "verdict": "running", "reason": "a pass is live; an enqueue joins it"}
    if report["state"] == "completed" and not force:
        return {**verdict, "verdict": "completed",
                "reason": "a completed pass is in the ledger; --force sweeps again into a new ledger row"}
    return {**verdict, "verdict": "run"}


def enqueue_backfill(name: str, *, force: bool = False, database: str | None = None) -> dict[str, Any]:
    """Enqueue one pass straight into the job table (its own transaction, never the outbox):
    answer ``{"name", "job_id", "run_id", "deduped"}``."""
    declared = require_backfill(name)
    (answer,) = submit([declared.handle.using(database=database).row({"force": force})], database=database,
                       direct=True)
    return {"name": name, "job_id": str(answer.id), "run_id": str(answer.run_id), "deduped": bool(answer.deduped)}


def require_backfill(name: str) -> Backfill:
    declared = get_backfill(name)
    if declared is None:
        known = ", ".join(b.name for b in registered_backfills()) or "none declared"
        raise JobsError(X_BACKFILL_NOT_FOUND, f"No backfill is declared under the name {name!r} (known: {known}).")
    return declared


def dry_run_context(declared: Backfill) -> JobContext:
    """The context ``source``/``count`` see outside a run: no job or run id, attempt 0."""
    handle = declared.handle
    return JobContext(job_id=None, run_id=None, name=handle.name, queue=handle.queue, attempt=0,  # type: ignore[arg-type]
                      max_attempts=handle.max_attempts, tenant_id=handle.tenant_for(), enqueued_by=None,
                      cancelled=CancelToken())


def _run(row: Any) -> dict[str, Any] | None:
    if row is None:
        return None
    return {field: plain(getattr(row, field)) for field in (
        "run_id", "job_id", "status", "rows", "batches", "last_cursor", "checksum", "forced", "previous_run_id",
        "error_code", "started_at", "completed_at")}

