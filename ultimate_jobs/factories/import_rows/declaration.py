"""``import_rows()``: a file in a Django ``Storage`` read into the app's tables, a page at a time.

Usage::

    # shop/jobs.py
    from django import forms
    from django.core.files.storage import storages
    from ultimate_jobs import import_rows

    class ProductRow(forms.Form):
        sku = forms.CharField(max_length=50)
        price = forms.DecimalField(max_digits=12, decimal_places=2)

    def upsert(batch):                    # at least once per page: write idempotently
        Product.objects.bulk_create([Product(org=batch.input["org"], **row) for row in batch.rows],
                                    update_conflicts=True, unique_fields=["org", "sku"],
                                    update_fields=["price"])

    import_products = import_rows(
        name="shop.import-products", tenant="{org}", storage=lambda: storages["imports"],
        key=lambda *, org, upload: f"uploads/{org}/{upload}", columns=["sku", "price"],
        form=ProductRow, handle=upsert, errors_prefix="import-errors/{org}")

    import_products.enqueue(org="acme", upload="prices.csv")

Options (default): ``name``, ``tenant`` (required), ``storage`` (required: ``callable() ->
Storage``), ``key`` (required: ``callable(**input) -> str`` or a format string: the object's
name), ``columns`` (required: the field names), ``handle`` (required: ``callable(batch)``;
``batch.rows``, ``batch.input``, ``batch.ctx``, ``batch.page``), ``format`` ("csv" or "ndjson"),
``form`` (None: a Django ``Form`` class; without one a row is its columns' text), ``errors_storage``
(None: ``storage``), ``errors_prefix`` (None: ``"import-errors/<name>"``; a format string or a
callable over the input), ``batch`` (500 rows per ``handle`` call), ``page_bytes`` (1 MiB),
``max_record_bytes`` (64 KiB), ``max_row_errors`` (1,000; 0 allowed), ``idempotency_key`` (None:
the name and a digest of the input), ``queue``, ``retry``, ``timeout``.

A CSV's first non-blank line is its header and must name exactly ``columns`` in any order (step
``header``). Then one step ``page:<n>`` per ``page_bytes``: the page is read with ``seek`` + ``read``
from the checkpointed byte offset, cut after its last whole record (quote-aware, so a newline
inside ``"..."`` is data; CRLF and a UTF-8 BOM read as nothing; a character split by the page edge
is re-read whole by the next page), and its checkpoint is the offset after that record — so a
killed run resumes there and no carry-over survives a step. Each row is coerced and validated by
``form`` as an HTTP form would be, accepted rows go to ``handle`` ``batch`` at a time (at least once
per page), and each refused row is written as ``{"line", "field", "code"}`` — never the value — to
``<errors_prefix>/<run_id>/errors-<NNNNN>.ndjson``, one object per page with refusals (named by
page index, so a replay overwrites it). Result: ``{"rows", "refused", "pages", "bytes",
"error_prefix"}``. No formula guard on the way in: an import cannot know a ``'`` was added.

Refused: at declaration ``X_JOB_DECLARATION_INVALID`` / ``X_JOB_TENANT_REQUIRED``; in the run
(terminal) ``X_IMPORT_HEADER_MISMATCH`` (also an empty file), ``X_IMPORT_RECORD_TOO_LARGE`` (at its
byte offset; usually an unclosed quote), ``X_IMPORT_TOO_MANY_ERRORS`` (past ``max_row_errors``; the
batch that crossed it is not handled, its report is written), ``X_IMPORT_SOURCE_INVALID`` (the
object cannot be opened).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from django.core.files.storage import Storage
from django.forms import BaseForm

from ultimate_jobs.context import JobContext
from ultimate_jobs.durations import Duration
from ultimate_jobs.errors import X_IMPORT_SOURCE_INVALID, X_JOB_DECLARATION_INVALID, JobsError, Terminal
from ultimate_jobs.factories.export_rows import (
    Format,
    Prefix,
    check_fields,
    check_format,
    check_prefix,
    render_prefix,
)
from ultimate_jobs.factories.import_rows.page import ImportBatch, read_header, run_page, start_offset
from ultimate_jobs.factories.kit import (
    declare,
    input_key,
    missing_tenant,
    named,
    optional_callable,
    require_callables,
    whole_number,
)
from ultimate_jobs.handle import JobHandle
from ultimate_jobs.inputs import IdempotencyKey, Tenant
from ultimate_jobs.retry import Retry

__all__ = ["Import", "ImportBatch", "ImportResult", "import_rows"]

KiB = 1024
MiB = 1024 * KiB
DEFAULT_PAGE_BYTES = MiB
DEFAULT_MAX_RECORD_BYTES = 64 * KiB


@dataclass(frozen=True, slots=True, kw_only=True)
class Import:
    """What ``import_rows()`` declared, as the pages read it."""

    name: str
    storage: Callable[[], Storage]
    errors_storage: Callable[[], Storage]
    columns: tuple[str, ...]
    handle_batch: Callable[[ImportBatch], object]
    format: Format
    form: type[BaseForm] | None
    batch: int
    page_bytes: int
    max_record_bytes: int
    max_row_errors: int


class ImportResult(TypedDict):
    """An import's result: rows handed over and refused, pages and bytes read, the run's error prefix."""

    rows: int
    refused: int
    pages: int
    bytes: int
    error_prefix: str


def import_rows(*, name: str, tenant: Tenant | None = None, storage: Callable[[], Storage],
                key: str | Callable[..., str], columns: Sequence[str], handle: Callable[[ImportBatch], object],
                format: Format = "csv", form: type[BaseForm] | None = None,
                errors_storage: Callable[[], Storage] | None = None, errors_prefix: Prefix | None = None,
                batch: int = 500, page_bytes: int = DEFAULT_PAGE_BYTES,
                max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES, max_row_errors: int = 1000,
                idempotency_key: IdempotencyKey | None = None, queue: str = "default",
                retry: Retry | int | None = None, timeout: Duration | None = None) -> JobHandle[..., ImportResult]:
    """Declare an import; see the module docstring for every option, the report and the result.

    The handle's input is the app's keyword-only input, which no ParamSpec literal spells: it
    answers ``JobHandle[..., ImportResult]``."""
    name, owner = named("import_rows", name)
    if tenant is None:
        raise missing_tenant(owner=owner, why="an import writes some org's rows",
                             fix="Pass tenant=NO_TENANT for tables without tenants, or the input's tenant.")
    require_callables(owner=owner, storage=storage, handle=handle)
    optional_callable(errors_storage, owner=owner, option="errors_storage")
    if not (callable(key) or (isinstance(key, str) and key)):
        raise JobsError(X_JOB_DECLARATION_INVALID, f"{owner}: key={key!r} is neither a format string nor a "
                        "callable(**input) -> str.", 'Pass key="uploads/{org}/{upload}".')
    columns = check_fields(owner, columns)
    check_format(owner, format)
    if form is not None and not (isinstance(form, type) and hasattr(form, "is_valid") and hasattr(form, "base_fields")):
        raise JobsError(X_JOB_DECLARATION_INVALID, f"{owner}: form={form!r} is not a Django Form class.",
                        "Pass form=MyRowForm (a django.forms.Form subclass), or leave it out.")
    if form is not None and set(form.base_fields) - set(columns):
        extra = sorted(set(form.base_fields) - set(columns))
        raise JobsError(X_JOB_DECLARATION_INVALID, f"{owner}: form has fields {extra} that columns= does not name.",
                        "Name every form field in columns=.")
    for option, number, low in (("batch", batch, 1), ("page_bytes", page_bytes, 1024),
                                ("max_record_bytes", max_record_bytes, 16), ("max_row_errors", max_row_errors, 0)):
        whole_number(number, owner=owner, option=option, low=low)
    prefix = errors_prefix if errors_prefix is not None else f"import-errors/{name}"
    check_prefix(owner, prefix, option="errors_prefix", fix='Pass errors_prefix="import-errors/{org}".')
    declared = Import(name=name, storage=storage, errors_storage=errors_storage or storage, columns=columns,
                      handle_batch=handle, format=format, form=form, batch=batch, page_bytes=page_bytes,
                      max_record_bytes=max_record_bytes, max_row_errors=max_row_errors)

    def body(ctx: JobContext, /, **input: Any) -> ImportResult:
        object_key = confined(name, key(**input) if callable(key) else key.format_map(input))
        error_prefix = f"{render_prefix(prefix, input)}/{ctx.run_id}"
        offset, line, header = 0, 1, None
        if format == "csv":
            start = ctx.step.run("header", lambda: read_header(declared, storage(), object_key))
            offset, line, header = start["offset"], start["line"], start["header"]
        else:
            offset = start_offset(declared, storage(), object_key)
        rows = refused = pages = 0
        while True:
            out = ctx.step.run(f"page:{pages}", lambda: run_page(  # noqa: B023
                declared, ctx, input, key=object_key, index=pages, offset=offset, line=line,  # noqa: B023
                header=header, refused_before=refused, error_prefix=error_prefix))  # noqa: B023
            pages += 1
            rows, refused = rows + out["rows"], refused + out["refused"]
            offset, line = out["offset"], out["line"]
            ctx.progress(offset, note=f"page {pages - 1}")
            if out["done"]:
                break
        return {"rows": rows, "refused": refused, "pages": pages, "bytes": offset, "error_prefix": error_prefix}

    return declare(body, label=f"import_rows[{name}]", doc=f"The import {name!r}.", name=name, tenant=tenant,
                   queue=queue, retry=retry, timeout=timeout, idempotency_key=input_key(name, idempotency_key))


def confined(name: str, object_key: object) -> str:
    """The storage name ``key`` answered, when it stays where it says: refused (terminal
    ``X_IMPORT_SOURCE_INVALID``, before anything is read) when it is not a non-empty string, is
    absolute (``/...``, ``C:...``), has a ``..`` segment, a backslash or a NUL — so an input cannot
    walk a tenant-prefixed key (``f"uploads/{org}/{upload}"``) out of its prefix."""
    problem = None
    if not isinstance(object_key, str) or not object_key:
        problem = "is not a non-empty string"
    elif "\x00" in object_key:
        problem = "holds a NUL"
    elif "\\" in object_key:
        problem = "holds a backslash"
    elif object_key.startswith("/") or (len(object_key) > 1 and object_key[1] == ":" and object_key[0].isalpha()):
        problem = "is absolute"
    elif ".." in object_key.split("/"):
        problem = "has a '..' segment"
    if problem is None:
        return str(object_key)
    raise Terminal(f"import_rows {name!r}: the storage name {object_key!r:.200} {problem}; nothing was read.",
                   code=X_IMPORT_SOURCE_INVALID,
                   fix="Name the object under its prefix with plain segments: check the input (an upload id, not "
                   "a path) before enqueueing.")
