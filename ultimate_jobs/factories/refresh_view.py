"""``refresh_view()``: ``REFRESH MATERIALIZED VIEW [CONCURRENTLY]`` as a job.

Usage::

    # stats/jobs.py
    from ultimate_jobs import refresh_view, task

    class PostTotals(models.Model):          # the view, read through an unmanaged model
        post_id = models.BigIntegerField(primary_key=True)
        total = models.BigIntegerField()

        class Meta:
            managed = False
            db_table = "post_totals"          # CREATE MATERIALIZED VIEW post_totals ... (a migration's RunSQL)

    refresh_totals = refresh_view(name="stats.refresh-post-totals", view=PostTotals, concurrently=True)
    task(name="stats.refresh-post-totals", cron="*/15 * * * *", tz="UTC", job=refresh_totals)

Options (default): ``name``, ``view`` (a model, usually ``Meta.managed = False``, or a relation
name, ``"schema.name"`` allowed), ``concurrently`` (False: readers keep the old rows meanwhile when
True, which needs a unique index on the view), ``database`` (None: the router's database for the
model, else ``"default"``), ``queue``, ``retry``. The job takes no input; its key is its name (one
live refresh per view), and it acts for no tenant (the read path scopes the rows).

Each run is one step ``refresh``: the relation is described, refused if it is not a materialized
view or ``concurrently`` has no unique index to use, then refreshed. Result: ``{"view",
"concurrently"}``.

Refused with ``X_JOB_REFRESH_VIEW_INVALID``: at declaration on SQLite (no materialized views), or
a ``view`` that is neither a model nor a name; by ``manage.py check`` (``ultimate_jobs.E011``) and
by the first run (terminal) for a relation that is not a materialized view, or ``concurrently``
without a unique index.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TypedDict

from django.db import connections, models, router

from ultimate_jobs.context import JobContext
from ultimate_jobs.db import store_for
from ultimate_jobs.errors import X_JOB_REFRESH_VIEW_INVALID, JobsError, Terminal
from ultimate_jobs.factories.kit import declare, literal_key, named, require_bool
from ultimate_jobs.handle import AnyJobHandle, JobHandle
from ultimate_jobs.inputs import NO_TENANT
from ultimate_jobs.registry import registered_jobs
from ultimate_jobs.retry import Retry

__all__ = ["RefreshResult", "RefreshView", "refresh_view", "registered_views", "view_problem"]


@dataclass(frozen=True, slots=True)
class RefreshView:
    """What ``refresh_view()`` declared."""

    name: str
    view: str
    concurrently: bool
    database: str


class RefreshResult(TypedDict):
    """A run's result: the view refreshed, and whether concurrently."""

    view: str
    concurrently: bool


_declarations: weakref.WeakKeyDictionary[AnyJobHandle, RefreshView] = weakref.WeakKeyDictionary()


def registered_views() -> list[RefreshView]:
    """Every refresh this process declared (``manage.py check`` describes each view)."""
    return [_declarations[h] for h in registered_jobs() if h in _declarations]


def refresh_view(*, name: str, view: type[models.Model] | str, concurrently: bool = False,
                 database: str | None = None, queue: str = "default",
                 retry: Retry | int | None = None) -> JobHandle[[], RefreshResult]:
    """Declare a refresh; see the module docstring for every option and refusal."""
    code = X_JOB_REFRESH_VIEW_INVALID
    name, owner = named("refresh_view", name)
    if isinstance(view, type) and issubclass(view, models.Model):
        relation = view._meta.db_table
        database = database or router.db_for_write(view) or "default"
    elif isinstance(view, str) and view.strip():
        relation = view.strip()
        database = database or "default"
    else:
        raise JobsError(code, f"{owner}: view={view!r} is neither a model nor a relation name.")
    concurrently = require_bool(concurrently, owner=owner, option="concurrently", code=code)
    if database not in connections:
        raise JobsError(code, f"{owner}: database={database!r} is not in DATABASES.")
    if connections[database].vendor != "postgresql":
        raise JobsError(code, f"{owner}: the database {database!r} is {connections[database].vendor}, which has no "
                        "materialized views.", "Declare refresh_view only where the view lives on PostgreSQL.")
    declared = RefreshView(name=name, view=relation, concurrently=concurrently, database=database)

    def body(ctx: JobContext, /) -> RefreshResult:
        def refresh() -> RefreshResult:
            store = store_for(declared.database)
            problem, qualified = view_problem(declared)
            if problem is not None or qualified is None:
                raise Terminal(problem or "", code=code)
            store.view_refresh(name=qualified, concurrently=declared.concurrently)
            return {"view": declared.view, "concurrently": declared.concurrently}

        out: RefreshResult = ctx.step.run("refresh", refresh)
        return out

    handle = declare(body, label=f"refresh_view[{name}]", doc=f"Refresh the materialized view {relation}.",
                     name=name, idempotency_key=literal_key(name), tenant=NO_TENANT, queue=queue, retry=retry)
    _declarations[handle] = declared
    return handle


def view_problem(declared: RefreshView) -> tuple[str | None, tuple[str, str] | None]:
    """Why the declared view cannot be refreshed as declared (None when it can), and its
    schema-qualified name."""
    facts = store_for(declared.database).view_describe(name=declared.view)
    owner = f"refresh_view {declared.name!r}"
    if facts.kind is None:
        return f"{owner}: no relation {declared.view!r} exists on {declared.database!r}.", None
    if facts.kind != "matview":
        return f"{owner}: {declared.view!r} is a {facts.kind}, not a materialized view.", facts.qualified
    if declared.concurrently and not facts.unique_index:
        return (f"{owner}: concurrently=True, but {declared.view!r} has no unique index (with no WHERE and no "
                "expression) for REFRESH ... CONCURRENTLY to match rows on."), facts.qualified
    return None, facts.qualified

