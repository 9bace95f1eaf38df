"""``subject_export()``: everything the reach holds of one person, written through a Django ``Storage``.

Usage::

    export_member = subject_export(name="members.export", tenant="{org}", subject=member,
                                   storage=lambda: storages["exports"], prefix="subjects/{org}/{member_id}")
    export_member.enqueue(org="acme", member_id=42)

Options (default): ``name``, ``tenant`` (required), ``subject`` (a ``define_subject`` value),
``storage`` (``callable() -> Storage``), ``prefix`` (a format string over the input or a
``callable(**input)``), ``format`` ("ndjson" or "csv"), ``page`` (1,000 rows), ``idempotency_key``
(None: the name and a digest of the input), ``queue``, ``retry``, ``timeout``.

Each reached table (retained ones included: they are the person's data too) is read in keyset
pages by primary key, one step ``<table>:<n>`` and ONE object per page:
``<prefix>/<run_id>/<app_label.Model>/part-<NNNNN>.<ext>`` with every concrete column; then step
``index`` writes ``<prefix>/<run_id>/index.json``: each table's row count, treatment and retain
reason, and its objects. A replayed page rewrites the same object. Over a subject declared with
``tenant=``, a person of another tenant is terminal ``X_JOB_TENANT_MISMATCH`` before anything is
read or written. Result: ``{"prefix", "index",
"tables": {label: rows}}``. Refuses to start while a reached model has no treatment
(``X_SUBJECT_TABLE_UNDECLARED``, terminal).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict

from django.core.files.storage import Storage
from django.db.models import Model

from ultimate_jobs import jsoncodec
from ultimate_jobs.context import JobContext
from ultimate_jobs.durations import Duration
from ultimate_jobs.factories.export_rows import (
    Format,
    Prefix,
    check_format,
    check_prefix,
    encode_rows,
    render_prefix,
    write_object,
)
from ultimate_jobs.factories.kit import declare, input_key, named, require_callables
from ultimate_jobs.factories.subject.declaration import Subject, note_subject_job
from ultimate_jobs.factories.subject.erase import check_declaration, subject_key
from ultimate_jobs.factories.subject.reach import label
from ultimate_jobs.factories.subject.rows import rows_of, stored
from ultimate_jobs.handle import JobHandle
from ultimate_jobs.inputs import IdempotencyKey, Tenant
from ultimate_jobs.retry import Retry

__all__ = ["SubjectExportResult", "subject_export"]


class SubjectExportResult(TypedDict):
    """An export's result: the run's prefix, its ``index.json``, and each table's row count."""

    prefix: str
    index: str
    tables: dict[str, int]


def subject_export(*, name: str, tenant: Tenant | None = None, subject: Subject, storage: Callable[[], Storage],
                   prefix: Prefix, format: Format = "ndjson", page: int = 1000,
                   idempotency_key: IdempotencyKey | None = None, queue: str = "default",
                   retry: Retry | int | None = None,
                   timeout: Duration | None = None) -> JobHandle[..., SubjectExportResult]:
    """Declare the export of one person's data; see the module docstring.

    The handle's input is the app's keyword-only input, which no ParamSpec literal spells: it
    answers ``JobHandle[..., SubjectExportResult]``."""
    name, owner = named("subject_export", name)
    tenant, page = check_declaration(owner, tenant, subject, page)
    require_callables(owner=owner, storage=storage)
    check_format(owner, format)
    check_prefix(owner, prefix)

    def body(ctx: JobContext, /, **input: Any) -> SubjectExportResult:
        key = subject_key(subject, input, ctx.tenant_id)
        reach = subject.reach()
        run_prefix = f"{render_prefix(prefix, input)}/{ctx.run_id}"
        target = storage()
        tables: dict[str, dict[str, Any]] = {}
        for model in reach.models:
            fields = [f.attname for f in model._meta.concrete_fields]
            objects: list[str] = []
            rows, index, cursor = 0, 0, None
            while True:
                def part(after: Any = cursor, at: int = index, m: type[Model] = model,
                         f: list[str] = fields) -> dict[str, Any]:
                    found = rows_of(reach, m, key, subject.model).order_by("pk")
                    if after is not None:
                        found = found.filter(pk__gt=after)
                    values = list(found.values_list("pk", *f)[:page])
                    if not values:
                        return {"cursor": after, "rows": 0, "object": None}
                    object_name = f"{run_prefix}/{label(m)}/part-{at:05d}.{format}"
                    write_object(target, object_name, encode_rows((v[1:] for v in values), f, format))
                    return {"cursor": stored(values[-1][0]), "rows": len(values), "object": object_name}

                out = ctx.step.run(f"{label(model)}:{index}", part)
                rows += out["rows"]
                if out["object"]:
                    objects.append(out["object"])
                if out["rows"] < page:
                    break
                index, cursor = index + 1, out["cursor"]
            treatment = subject.treatments[model]
            tables[label(model)] = {"rows": rows, "treatment": treatment.kind, "reason": treatment.reason or None,
                                    "objects": objects}
        index_name = f"{run_prefix}/index.json"
        ctx.step.run("index", lambda: write_object(target, index_name, jsoncodec.dumps(
            {"subject": label(subject.model), "key": stored(key), "tables": tables}).encode()))
        return {"prefix": run_prefix, "index": index_name, "tables": {t: v["rows"] for t, v in tables.items()}}

    handle: JobHandle[..., SubjectExportResult] = declare(
        body, label=f"subject_export[{name}]", doc=f"Export one {label(subject.model)}'s data.", name=name,
        tenant=tenant, queue=queue, retry=retry, timeout=timeout, idempotency_key=input_key(name, idempotency_key))
    note_subject_job(handle, subject)
    return handle
