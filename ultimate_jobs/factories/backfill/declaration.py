"""``backfill()``: a data migration shipped as code — one paced, resumable pass over a QuerySet,
declared as a job.

Usage::

    # blog/jobs.py
    from ultimate_jobs import NO_TENANT, backfill

    def fill_slugs(batch):
        for post in batch.rows:                      # at least once per page: stay idempotent
            Post.objects.filter(pk=post.pk, slug="").update(slug=slugify(post.title))

    rewrite_slugs = backfill(
        name="rewrite-slugs", tenant=NO_TENANT,
        source=lambda ctx: Post.objects.filter(slug=""),
        handle=fill_slugs,
        count=lambda ctx: Post.objects.filter(slug="").count(),
        requires="blog.0012_post_slug", rate=10)

    rewrite_slugs.enqueue()                          # it is a job handle; or: manage.py jobs_backfill

Options (default): ``name`` (required: it keys the job, its steps and the ledger), ``tenant``
(required: ``NO_TENANT`` sweeps every tenant's rows; a tenant id string or a
``callable() -> str`` runs the pass as that tenant, ``ctx.tenant_id``, for ``source`` to filter
on), ``source`` (required: ``callable(ctx) -> QuerySet`` of model instances), ``handle``
(required: ``callable(batch)``; ``batch.rows``, ``batch.index``, ``batch.ctx``), ``batch``
(1,000 rows a page), ``rate`` (5 batches a second), ``requires`` (None: ``"app_label.0012_name"``,
a migration that must be applied), ``environments`` (None: every one; else a list the
``ENVIRONMENT`` setting must be in), ``count`` (None: ``callable(ctx) -> int``, how many rows still
match), ``atomic`` (False: True commits each page's writes on the jobs database together with its
checkpoint), ``queue`` ("default"), ``retry`` (``Retry()``), ``timeout`` (None: per attempt).

The pass reads the source in keyset pages by primary key (never OFFSET), one durable step per
page named ``batch:<n>`` whose stored output is ``{"cursor": <last pk>, "rows": <count>}`` —
never the rows — so a pass killed mid-sweep resumes at the page it stopped on, replaying finished
pages from storage without reading them. The pacer waits before each page that has no
checkpoint yet, so the replay pays none. ``handle`` runs at least once per page; with ``atomic=True`` a page whose
``handle`` writes only to the jobs database is applied exactly once (its writes roll back with
a checkpoint that never landed), and the pacer waits before the page's transaction opens.
The idempotency key is the name: one live pass per name. Input: ``force``
(False): sweep again even though a completed pass is in the ledger (``BackfillRun``), into a new
ledger row. The run's result is ``{"name", "batches", "rows", "skipped", "previous_run_id"}``.

Refused at declaration (``X_JOB_DECLARATION_INVALID``, ``X_JOB_TENANT_REQUIRED``): a missing
name, tenant, source or handle; ``batch`` that is not a whole number from 1 to 100,000; ``rate``
that is not finite and above zero; a ``requires`` not shaped ``app_label.migration``; an
``environments`` that is not a non-empty list of names. Refused in the pass:
``X_BACKFILL_ENVIRONMENT`` (terminal, no ledger row), ``X_BACKFILL_MIGRATION_PENDING`` (retried:
the deploy may still be migrating), ``X_BACKFILL_SOURCE_INVALID`` (terminal),
``X_BACKFILL_STALLED`` (terminal: ``count`` still answers rows after the last page).
"""

from __future__ import annotations

import hashlib
import types
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from django.db.models import Model, QuerySet

from ultimate_jobs.context import JobContext
from ultimate_jobs.durations import Duration
from ultimate_jobs.errors import X_JOB_DECLARATION_INVALID, JobsError
from ultimate_jobs.factories.backfill.sweep import BackfillBatch, BackfillResult, run
from ultimate_jobs.factories.kit import (
    declare,
    missing_tenant,
    named,
    optional_callable,
    require_bool,
    require_callables,
    whole_number,
)
from ultimate_jobs.factories.pacer import DEFAULT_RATE, check_rate
from ultimate_jobs.handle import AnyJobHandle, JobHandle
from ultimate_jobs.inputs import NO_TENANT, Tenant, _NoTenant
from ultimate_jobs.registry import get_job_handle, registered_jobs
from ultimate_jobs.retry import Retry

if TYPE_CHECKING:
    from hashlib import _Hash

# BackfillBatch is public here (``ultimate_jobs.BackfillBatch``); the sweep that builds it owns it.
__all__ = ["Backfill", "BackfillBatch", "backfill", "checksum_of", "get_backfill", "registered_backfills"]

M = TypeVar("M", bound=Model)

# A backfill's tenant: NO_TENANT, a tenant id, or a callable() -> str (the input holds only force).
BackfillTenant = str | Callable[[], str] | _NoTenant
# The handle of a pass: its input, force=, is keyword-only, which no ParamSpec literal spells.
BackfillHandle = JobHandle[..., BackfillResult]

DEFAULT_BATCH = 1000
MAX_BATCH = 100_000


@dataclass(frozen=True, slots=True, kw_only=True)
class Backfill:
    """Everything ``backfill()`` declared that a job handle has no field for."""

    name: str
    handle: BackfillHandle
    source: Callable[[JobContext], QuerySet[Model]]
    handle_batch: Callable[[BackfillBatch[Any]], object]  # any model's batch: the pass holds one source
    batch: int
    rate: float
    checksum: str
    requires: str | None
    environments: tuple[str, ...] | None
    count: Callable[[JobContext], int] | None
    tenant: BackfillTenant
    atomic: bool = False

    def describe(self) -> dict[str, Any]:
        """The declaration as every surface reports it (plain JSON)."""
        return {"name": self.name, "queue": self.handle.queue, "batch": self.batch, "rate": self.rate,
                "checksum": self.checksum, "requires": self.requires,
                "environments": list(self.environments) if self.environments is not None else None,
                "counts": self.count is not None, "tenant": "none" if self.tenant is NO_TENANT else "declared",
                "atomic": self.atomic}


# Stamped on the handle `backfill()` built, never registered by the app: a plain @job is never a
# backfill, and the job registry stays the one answer to "does this name exist".
_declarations: weakref.WeakKeyDictionary[AnyJobHandle, Backfill] = weakref.WeakKeyDictionary()


def registered_backfills() -> list[Backfill]:
    """Every backfill this process declared, sorted by name."""
    return [_declarations[h] for h in registered_jobs() if h in _declarations]


def get_backfill(name: str) -> Backfill | None:
    """The backfill declared under ``name``, or None (also for a plain job of that name)."""
    handle = get_job_handle(name)
    return None if handle is None else _declarations.get(handle)


def checksum_of(source: Callable[..., object], handle: Callable[..., object]) -> str:
    """A hash of the compiled code of ``source`` and ``handle`` (names, constants, bytecode).

    Not ``rate`` or ``batch``: pacing is tuning, and changing it does not make a completed sweep
    a different sweep. Compiled code rather than source text, because a lambda's source is the
    whole line it sits on; a Python upgrade can therefore move it, which only warns.
    """
    digest = hashlib.sha256()
    for fn in (source, handle):
        _fingerprint(fn, digest)
    return digest.hexdigest()


def _fingerprint(fn: object, digest: _Hash) -> None:
    fn = getattr(fn, "__func__", fn)  # a bound method hashes its function
    code = getattr(fn, "__code__", None)
    if code is None:
        digest.update(f"{type(fn).__module__}.{type(fn).__qualname__}".encode())
        return

    def walk(c: types.CodeType) -> None:
        digest.update(c.co_code)
        digest.update(repr((c.co_names, c.co_varnames)).encode())
        for const in c.co_consts:
            if isinstance(const, types.CodeType):
                walk(const)
            else:
                digest.update(repr(const).encode())

    walk(code)


def backfill(*, name: str, tenant: BackfillTenant | None = None, source: Callable[[JobContext], QuerySet[M]],
             handle: Callable[[BackfillBatch[M]], object], batch: int = DEFAULT_BATCH, rate: float = DEFAULT_RATE,
             requires: str | None = None, environments: Sequence[str] | None = None,
             count: Callable[[JobContext], int] | None = None, atomic: bool = False, queue: str = "default",
             retry: Retry | int | None = None, timeout: Duration | None = None) -> BackfillHandle:
    """Declare a backfill; see the module docstring for every option and refusal."""
    code = X_JOB_DECLARATION_INVALID
    name, owner = named("backfill", name)
    if tenant is None:
        raise missing_tenant(owner=owner, why="a backfill is a job and says which org it acts for",
                             fix="Pass tenant=NO_TENANT to sweep every tenant's rows, or the tenant id.")
    if not (tenant is NO_TENANT or (isinstance(tenant, str) and tenant) or callable(tenant)):
        raise JobsError(code, f"{owner}: tenant={tenant!r} is not NO_TENANT, a tenant id or a callable() -> str.")
    require_callables(owner=owner, fix="Pass source=lambda ctx: Model.objects.filter(...) and handle=fn(batch).",
                      source=source, handle=handle)
    count = optional_callable(count, owner=owner, option="count",
                              fix="Pass count=lambda ctx: <the same filter as source>.count(), or leave it out.")
    batch = whole_number(batch, owner=owner, option="batch", high=MAX_BATCH, unit="rows",
                         fix=f"Set batch={DEFAULT_BATCH} (rows per statement and per durable step).")
    rate = check_rate(rate, owner=owner)
    atomic = require_bool(atomic, owner=owner, option="atomic")
    if requires is not None:
        app, _, migration = requires.partition(".") if isinstance(requires, str) else ("", "", "")
        if not app or not migration or "." in migration:
            raise JobsError(code, f"{owner}: requires={requires!r} is not a migration.",
                            'Name it as "app_label.migration_name", e.g. "blog.0012_post_slug".')
    if environments is not None:
        if isinstance(environments, str) or not isinstance(environments, Sequence) or not environments or not all(
                isinstance(e, str) and e for e in environments):
            raise JobsError(code, f"{owner}: environments={environments!r} is not a list of environment names.",
                            'Pass a list such as ["staging", "production"], or leave it out for every one.')
        environments = tuple(environments)
    declaration: dict[str, Backfill] = {}

    def run_pass(ctx: JobContext, /, *, force: bool = False) -> BackfillResult:
        return run(declaration["self"], ctx, force=force)

    rendered_tenant: Tenant = NO_TENANT
    if isinstance(tenant, str):
        rendered_tenant = lambda **_: tenant  # noqa: E731 - a fixed tenant id for every pass
    elif not isinstance(tenant, _NoTenant):
        tenant_of = tenant
        rendered_tenant = lambda **_: tenant_of()  # noqa: E731 - the input holds only force
    handle_job = declare(run_pass, label=f"backfill[{name}]", doc=f"The pass of the backfill {name!r}.", name=name,
                         idempotency_key=lambda **_: name, tenant=rendered_tenant, queue=queue, retry=retry,
                         timeout=timeout)
    declared = Backfill(name=name, handle=handle_job, source=source, handle_batch=handle, batch=batch, rate=rate,
                        checksum=checksum_of(source, handle), requires=requires, environments=environments,
                        count=count, tenant=tenant, atomic=atomic)
    declaration["self"] = declared
    _declarations[handle_job] = declared
    return handle_job
