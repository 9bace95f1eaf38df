"""``subject_erase()``: erase one person's data as a job, children first, the subject last.

Usage::

    erase_member = subject_erase(name="members.erase", tenant="{org}", subject=member)
    erase_member.enqueue(org="acme", member_id=42)

Options (default): ``name``, ``tenant`` (required: one job per tenant; crossing tenants is the
app's loop; over a subject declared with ``tenant=``, the person's row must belong to the run's
tenant, else terminal ``X_JOB_TENANT_MISMATCH`` with nothing read or written, and ``NO_TENANT`` is
refused when declared), ``subject`` (a ``define_subject`` value), ``page`` (500 parent keys a step),
``idempotency_key`` (None: the name and a digest of the input), ``queue``, ``retry``, ``timeout``.

The run refuses to start (terminal, nothing written) while a reached model has no treatment
(``X_SUBJECT_TABLE_UNDECLARED``). Then: each key cut from a loop of deleted tables is cleared
(``clear:<table>.<field>:<n>``), each reached table in children-first order is deleted or
anonymized through each foreign key that reaches it (``<table>.<field>:<n>``; a retained table is
left alone), and the subject's own row last (``subject``). One step per page of parent keys; every
write is ``field IN (page)`` or the subject's primary key, so a replayed page changes nothing
twice, and a killed run resumes at the page it stopped on. Result: ``{"subject", "key", "tables":
{label: {"treatment", "rows"}}}`` (rows written, as each page's step counted them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypedDict

from django.db.models import Model, QuerySet

from ultimate_jobs.context import JobContext
from ultimate_jobs.durations import Duration
from ultimate_jobs.errors import X_JOB_DECLARATION_INVALID, X_JOB_TENANT_MISMATCH, JobsError, Terminal
from ultimate_jobs.factories.kit import declare, input_key, missing_tenant, named, whole_number
from ultimate_jobs.factories.subject.declaration import Subject, Treatment, note_subject_job
from ultimate_jobs.factories.subject.reach import Edge, Reach, label
from ultimate_jobs.factories.subject.rows import parent_keys, rows_of, stored
from ultimate_jobs.handle import JobHandle
from ultimate_jobs.inputs import NO_TENANT, IdempotencyKey, Tenant
from ultimate_jobs.retry import Retry

__all__ = ["EraseResult", "erase_run", "subject_erase"]

DEFAULT_PAGE = 500
MAX_PAGE = 100_000


class TableWrites(TypedDict):
    """One reached table in an erase's result: its treatment and the rows written."""

    treatment: str
    rows: int


class EraseResult(TypedDict):
    """An erase's result: the subject's model label, its key (as stored), and each table's writes."""

    subject: str
    key: object
    tables: dict[str, TableWrites]


def subject_erase(*, name: str, tenant: Tenant | None = None, subject: Subject, page: int = DEFAULT_PAGE,
                  idempotency_key: IdempotencyKey | None = None, queue: str = "default",
                  retry: Retry | int | None = None, timeout: Duration | None = None) -> JobHandle[..., EraseResult]:
    """Declare the erase of one person's data; see the module docstring.

    The handle's input is the app's keyword-only input, which no ParamSpec literal spells: it
    answers ``JobHandle[..., EraseResult]``."""
    name, owner = named("subject_erase", name)
    tenant, page = check_declaration(owner, tenant, subject, page)

    def body(ctx: JobContext, /, **input: Any) -> EraseResult:
        return erase_run(subject, ctx, input, page=page)

    handle: JobHandle[..., EraseResult] = declare(
        body, label=f"subject_erase[{name}]", doc=f"Erase one {label(subject.model)}'s data.", name=name,
        tenant=tenant, queue=queue, retry=retry, timeout=timeout, idempotency_key=input_key(name, idempotency_key))
    note_subject_job(handle, subject)
    return handle


def check_declaration(owner: str, tenant: Tenant | None, subject: object, page: object) -> tuple[Tenant, int]:
    """The tenant and page of a subject job, checked (``subject`` must be a ``define_subject`` value)."""
    if tenant is None:
        raise missing_tenant(owner=owner, why="one person's data is erased per tenant",
                             fix="Pass tenant=\"{org}\" (the input's tenant), or NO_TENANT for an app without tenants.")
    if not isinstance(subject, Subject):
        raise JobsError(X_JOB_DECLARATION_INVALID, f"{owner}: subject={subject!r} is not a define_subject() value.")
    if subject.tenant is not None and tenant is NO_TENANT:
        raise JobsError(X_JOB_DECLARATION_INVALID, f"{owner}: the subject {label(subject.model)} is scoped by "
                        f"tenant={subject.tenant!r} but the job acts for NO_TENANT, so every run would end "
                        f"{X_JOB_TENANT_MISMATCH}.", 'Declare the job\'s tenant from its input: tenant="{org}".')
    return tenant, whole_number(page, owner=owner, option="page", high=MAX_PAGE)


def subject_key(subject: Subject, input: Mapping[str, Any], tenant_id: str | None) -> object:
    """The person's key from the input, once the run may touch them: every reached table has a
    treatment, and — for a subject declared with ``tenant`` — the subject's row belongs to the run's
    tenant (terminal ``X_JOB_TENANT_MISMATCH`` before anything else is read or written). A key with
    no row passes: nothing is reached from it."""
    try:
        subject.refuse_undeclared()
        key = subject.key_of(input)
    except JobsError as err:
        raise Terminal(err.cause, code=err.code, fix=err.fix) from None
    except (KeyError, TypeError) as err:
        raise Terminal(f"the subject's key cannot be read from the input: {err!r}.",
                       code=X_JOB_DECLARATION_INVALID) from None
    if subject.tenant is not None:
        found, owner = subject.tenant_of(key)
        if found and (owner is None or str(owner) != tenant_id):
            raise Terminal(f"the {label(subject.model)} with key {stored(key)!r} does not belong to tenant "
                           f"{tenant_id!r} (its {subject.tenant} differs); nothing was read, written or exported.",
                           code=X_JOB_TENANT_MISMATCH,
                           fix="Enqueue the erase or export under the tenant the person belongs to.")
    return key


def erase_run(subject: Subject, ctx: JobContext, input: Mapping[str, Any], *, page: int) -> EraseResult:
    key = subject_key(subject, input, ctx.tenant_id)
    reach = subject.reach()
    treatments = subject.treatments
    written: dict[str, TableWrites] = {label(m): {"treatment": treatments[m].kind, "rows": 0} for m in reach.order}
    for edge in reach.clears:
        paged(ctx, f"clear:{label(edge.child)}.{edge.field_name}", reach, edge, key, subject.model, page,
              lambda keys, e=edge: e.child._default_manager.filter(**{f"{e.field}__in": keys})
              .update(**{e.field: None}))
    for model in reach.order[:-1]:
        treatment = treatments[model]
        if treatment.kind == "retain":
            continue
        for edge in (e for e in reach.edges if e.child is model and e.child is not e.parent):
            written[label(model)]["rows"] += paged(
                ctx, f"{label(model)}.{edge.field_name}", reach, edge, key, subject.model, page,
                lambda keys, e=edge, t=treatment: apply(t, e.child._default_manager.filter(**{f"{e.field}__in": keys})))
    written[label(subject.model)]["rows"] = ctx.step.run("subject", lambda: apply(
        treatments[subject.model], rows_of(reach, subject.model, key, subject.model)))
    return {"subject": label(subject.model), "key": stored(key), "tables": written}


def paged(ctx: JobContext, prefix: str, reach: Reach, edge: Edge, key: object, subject: type[Model], size: int,
          write: Callable[..., int]) -> int:
    """One step per page of parent keys; answer the rows written."""
    index, cursor, total = 0, None, 0
    while True:
        def step(after: Any = cursor) -> dict[str, Any]:
            keys = parent_keys(reach, edge, key, subject, after=after, size=size)
            rows = write(keys) if keys else 0
            return {"cursor": stored(keys[-1]) if keys else after, "keys": len(keys), "rows": rows}

        out = ctx.step.run(f"{prefix}:{index}", step)
        written: int = out["rows"]
        total += written
        if out["keys"] < size:
            return total
        index, cursor = index + 1, out["cursor"]


def apply(treatment: Treatment, rows: QuerySet[Model]) -> int:
    """Delete or anonymize ``rows``; answer how many rows of that table were written."""
    if treatment.kind == "delete":
        return int(rows.delete()[1].get(rows.model._meta.label, 0))
    if treatment.kind == "anonymize":
        return int(rows.update(**treatment.values))
    return 0
