"""Internal: one attempt of a backfill's pass, run as the body of its job.

The order is what makes it safe to kill anywhere: the checks that need no ledger row come first
(environment, source, migration), then the ledger answers whether this name already has a
completed pass, then the pages run as steps ``batch:0``, ``batch:1``... Each page is read by
keyset (``pk > cursor ORDER BY pk LIMIT batch``), so a resumed attempt replays the finished
steps from storage and reopens the iteration at the cursor the last one left. Before a page that
has no checkpoint the pacer waits (a replayed page pays nothing, and no wait is ever spent inside
an ``atomic`` page's transaction); inside the page's step the page is read and handled, then the
ledger gets the running totals (at most once a second; the completed row has the exact ones).
``BackfillBatch``, the page ``handle`` is given, lives here with the pass that builds it; the
public name is ``ultimate_jobs.BackfillBatch``.

Logged events: ``jobs.backfill.skipped``, ``jobs.backfill.checksum-moved`` (warning),
``jobs.backfill.completed``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypedDict, TypeVar
from uuid import UUID

from django.db import connections
from django.db.migrations.recorder import MigrationRecorder
from django.db.models import CompositePrimaryKey, Model, QuerySet
from django.db.models.query import ModelIterable

from ultimate_jobs import jsoncodec
from ultimate_jobs.conf import get_settings
from ultimate_jobs.context import CancelToken, JobContext
from ultimate_jobs.errors import (
    X_ABORTED,
    X_BACKFILL_ENVIRONMENT,
    X_BACKFILL_MIGRATION_PENDING,
    X_BACKFILL_SOURCE_INVALID,
    X_BACKFILL_STALLED,
    X_DRAINING,
    X_INVARIANT,
    X_JOB_INPUT_INVALID,
    X_JOB_LEASE_LOST,
    X_JOB_SLOT_LOST,
    JobsError,
    Terminal,
)
from ultimate_jobs.factories.backfill.ledger import Ledger
from ultimate_jobs.factories.kit import is_whole
from ultimate_jobs.factories.pacer import Pacer
from ultimate_jobs.models import Job
from ultimate_jobs.runtime.steps import engine_of

if TYPE_CHECKING:
    from ultimate_jobs.factories.backfill.declaration import Backfill

log = logging.getLogger("ultimate_jobs")

# The ledger's running totals are a report for people, written at most this often (seconds);
# the completed row carries the exact ones. Once per page cost a commit per page (bench/RESULTS.md).
LEDGER_EVERY = 1.0

# A run that lost its claim must not write the ledger its new owner is writing; a drained run
# goes back to the queue and its row stays "running".
_NOT_A_FAILURE = (X_DRAINING, X_JOB_LEASE_LOST, X_JOB_SLOT_LOST)


M = TypeVar("M", bound=Model)


@dataclass(frozen=True, slots=True)
class BackfillBatch(Generic[M]):
    """One page of a pass, handed to ``handle``: the rows (model instances of the source's model,
    in primary-key order), the page's 0-based index (its step is ``batch:<index>``) and the run's
    context."""

    rows: list[M]
    index: int
    ctx: JobContext

    @property
    def cancelled(self) -> CancelToken:
        """The run's cancel token: check it in a long page so a drain is not held up."""
        return self.ctx.cancelled


class BackfillResult(TypedDict):
    """A pass's result: ``skipped`` when a completed pass exists and ``force`` was not set."""

    name: str
    batches: int
    rows: int
    skipped: bool
    previous_run_id: str | None


def run(backfill: Backfill, ctx: JobContext, *, force: bool) -> BackfillResult:
    if not isinstance(force, bool):
        raise Terminal(f"backfill {backfill.name!r}: force={force!r} must be True or False.", code=X_JOB_INPUT_INVALID)
    refusal = environment_refusal(backfill, get_settings().ENVIRONMENT)
    if refusal is not None:
        raise Terminal(refusal, code=X_BACKFILL_ENVIRONMENT)
    source = read_source(backfill, ctx)
    if backfill.requires is not None and not migration_applied(backfill.requires, source.db):
        raise JobsError(X_BACKFILL_MIGRATION_PENDING, f"backfill {backfill.name!r} requires the migration "
                        f"{backfill.requires}, which is not applied to the database {source.db!r}.")

    ledger = Ledger()
    own = ledger.get(ctx.run_id)
    if own is not None and own.status == "completed":
        # This run finished its pass and died before the job settled: answer what it did.
        return result(backfill.name, batches=own.batches, rows=own.rows, skipped=False,
                      previous_run_id=own.previous_run_id)
    previous = ledger.newest_completed(backfill.name, exclude_run=ctx.run_id)
    if own is None and previous is not None and not force:
        if previous.checksum != backfill.checksum:
            log.warning("jobs.backfill.checksum-moved name=%s run_id=%s completed_run_id=%s: source or handle "
                        "changed since the completed pass; not swept again (enqueue with force=True to sweep)",
                        backfill.name, ctx.run_id, previous.run_id)
        log.info("jobs.backfill.skipped name=%s run_id=%s completed_run_id=%s", backfill.name, ctx.run_id,
                 previous.run_id)
        return result(backfill.name, batches=0, rows=0, skipped=True, previous_run_id=previous.run_id)
    previous_run_id = own.previous_run_id if own is not None else (previous.run_id if previous else None)
    ledger.open(run_id=ctx.run_id, job_id=ctx.job_id, name=backfill.name, checksum=backfill.checksum,
                tenant_id=ctx.tenant_id, forced=force, previous_run_id=previous_run_id)
    try:
        batches, rows, cursor = sweep(backfill, ctx, source, ledger)
        if backfill.count is not None:
            remaining = parse_count(backfill, backfill.count(ctx))
            if remaining:
                raise Terminal(f"backfill {backfill.name!r} read its last page, but count() still answers "
                               f"{remaining} matching row(s): source and count select different rows, or handle "
                               "does not change what they select.", code=X_BACKFILL_STALLED)
        ledger.complete(ctx.run_id, rows=rows, batches=batches, cursor=cursor)
    except Exception as exc:
        code = getattr(exc, "code", None)
        # The token's reason, not the exception's: a step write refused after a lost lease raises
        # X_ABORTED, but the row is the new owner's by then.
        lost = ctx.cancelled.reason in _NOT_A_FAILURE
        if lost and job_cancelled(ctx.job_id, ledger.alias):
            # A lost lease is also how an operator's cancel reaches a body: no one owns the row now.
            ledger.fail(ctx.run_id, code=X_ABORTED, error="the pass was cancelled")
        elif not lost:
            ledger.fail(ctx.run_id, code=code if isinstance(code, str) else type(exc).__name__, error=str(exc))
        raise
    log.info("jobs.backfill.completed name=%s run_id=%s batches=%s rows=%s", backfill.name, ctx.run_id, batches,
             rows)
    return result(backfill.name, batches=batches, rows=rows, skipped=False, previous_run_id=previous_run_id)


def sweep(backfill: Backfill, ctx: JobContext, source: QuerySet[Model], ledger: Ledger) -> tuple[int, int, Any]:
    """Every page as its own step; answer (batches, rows, last cursor), replayed pages included."""
    pacer = Pacer(backfill.rate, owner=f"backfill {backfill.name!r}")
    batches = rows = 0
    cursor: Any = None
    reported = [-LEDGER_EVERY]  # when the ledger last got this pass's totals (time.monotonic())

    def page(index: int, after: Any, rows_before: int) -> dict[str, Any]:
        ordered = source.order_by("pk")
        found = list((ordered if after is None else ordered.filter(pk__gt=after))[: backfill.batch])
        if not found:
            return {"cursor": after, "rows": 0}
        backfill.handle_batch(BackfillBatch(rows=found, index=index, ctx=ctx))
        last = jsoncodec.loads(jsoncodec.dumps(found[-1].pk))  # the form the step stores
        if time.monotonic() - reported[0] >= LEDGER_EVERY:  # a commit of its own: not one per page
            ledger.progress(ctx.run_id, rows=rows_before + len(found), batches=index + 1, cursor=last)
            reported[0] = time.monotonic()
        return {"cursor": last, "rows": len(found)}

    index = 0
    while True:
        name = f"batch:{index}"
        if not _completed(ctx, name):  # a replayed page pays no wait; none is spent in a transaction
            pacer.wait(ctx.cancelled)
        output = ctx.step.run(name, lambda: page(index, cursor, rows), atomic=backfill.atomic)  # noqa: B023
        if not output["rows"]:
            break
        batches, rows, cursor = batches + 1, rows + output["rows"], output["cursor"]
        ctx.progress(rows, note=f"batch {index}")
        if output["rows"] < backfill.batch:
            break
        index += 1
    return batches, rows, cursor


def _completed(ctx: JobContext, name: str) -> bool:
    return engine_of(ctx.step).completed(name)


def job_cancelled(job_id: UUID, database: str) -> bool:
    return Job.objects.using(database).filter(id=job_id, state="cancelled").exists()


def read_source(backfill: Backfill, ctx: JobContext) -> QuerySet[Model]:
    """``source(ctx)``, refused (terminal) unless it is an unsliced QuerySet keyed by one column."""
    source = backfill.source(ctx)
    problem = None
    if not isinstance(source, QuerySet):
        problem = f"answered {type(source).__name__}, not a QuerySet"
    elif source.query.is_sliced:
        problem = "answered a sliced QuerySet (a pass pages it by primary key itself)"
    elif not issubclass(source._iterable_class, ModelIterable):  # values()/values_list(): no pk to page on
        problem = "answered values()/values_list() rows; a pass hands handle model instances"
    elif isinstance(source.model._meta.pk, CompositePrimaryKey):
        problem = f"selects {source.model.__name__}, whose primary key spans several columns"
    if problem:
        raise Terminal(f"backfill {backfill.name!r}: source {problem}.", code=X_BACKFILL_SOURCE_INVALID)
    return source


def environment_refusal(backfill: Backfill, environment: str | None) -> str | None:
    """Why this environment may not run the backfill, or None when it may."""
    if backfill.environments is None or environment in backfill.environments:
        return None
    here = environment or 'no named environment (ULTIMATE_JOBS["ENVIRONMENT"] is unset)'
    return f"backfill {backfill.name!r} runs only in {', '.join(backfill.environments)}; this is {here}."


def migration_applied(requires: str, database: str) -> bool:
    """Whether Django's migration recorder holds ``"app_label.migration_name"`` on ``database``."""
    app, _, name = requires.partition(".")
    return (app, name) in MigrationRecorder(connections[database]).applied_migrations()


def parse_count(backfill: Backfill, value: object) -> int:
    """``count()``'s answer as a whole number >= 0: NaN or -1 would let a stalled pass complete."""
    if not is_whole(value, 0):
        raise Terminal(f"backfill {backfill.name!r}: count() answered {value!r}; it must answer a whole number "
                       ">= 0.", code=X_INVARIANT, fix="Return Model.objects.filter(<source's filter>).count().")
    return value


def result(name: str, *, batches: int, rows: int, skipped: bool, previous_run_id: UUID | None) -> BackfillResult:
    return {"name": name, "batches": batches, "rows": rows, "skipped": skipped,
            "previous_run_id": str(previous_run_id) if previous_run_id is not None else None}
