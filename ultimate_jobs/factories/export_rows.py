"""``export_rows()``: a QuerySet written out through a Django ``Storage``, one object per page.

Usage::

    # shop/jobs.py
    from django.core.files.storage import storages
    from ultimate_jobs import export_rows

    export_orders = export_rows(
        name="shop.export-orders", tenant="{org}",
        source=lambda ctx, *, org: Order.objects.filter(org=org),
        fields=["id", "number", "customer_email", "total"],
        storage=lambda: storages["exports"], prefix="exports/{org}/orders", format="csv")

    export_orders.enqueue(org="acme")   # -> exports/acme/orders/<run_id>/part-00000.csv, part-00001.csv ...

Options (default): ``name``, ``tenant`` (required: ``NO_TENANT``, a format string or a callable
over the input, as for ``@job``), ``source`` (required: ``callable(ctx, **input) -> QuerySet``),
``fields`` (required: field names, lookups allowed, as ``values_list`` takes them), ``storage``
(required: ``callable() -> Storage``), ``prefix`` (required: a format string over the input or a
``callable(**input) -> str``), ``format`` ("csv" or "ndjson"), ``page`` (10,000 rows),
``idempotency_key`` (None: the name and a digest of the input, so one live export per input),
``queue``, ``retry``, ``timeout``.

The source is read in keyset pages by primary key (never OFFSET), one durable step ``part:<n>`` a
page whose stored output is the cursor, the row count and the object name — never the rows. Each
page becomes ONE object ``<prefix>/<run_id>/part-<NNNNN>.<csv|ndjson>``, named by its page index:
a page run twice (a crash between the write and its checkpoint) rewrites the same object with the
same bytes, and no object ever holds more than a page, so peak memory is one page. Every CSV part
starts with the header line; a string cell starting with ``=``, ``+``, ``-``, ``@``, TAB or CR
gets a leading ``'`` (the formula guard: a spreadsheet would evaluate it) — also when whitespace,
control or format characters (a NUL, a space, LF, a zero-width space) come first, and for the
fullwidth ``＝＋－＠`` (read under NFKC) — strings only, so a negative number stays a number. An
export of no rows writes one part holding only the header (CSV) or nothing (NDJSON). Result:
``{"pages", "rows", "prefix", "objects"}`` (``prefix`` is the run's: ``<prefix>/<run_id>``).

Refused at declaration (``X_JOB_DECLARATION_INVALID``, ``X_JOB_TENANT_REQUIRED``); in the run,
``X_EXPORT_SOURCE_INVALID`` (terminal) for a source that is not an unsliced QuerySet.
"""

from __future__ import annotations

import csv
import io
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import date, datetime, time
from typing import Any, Literal, TypedDict

from django.core.files.base import ContentFile
from django.core.files.storage import Storage
from django.db.models import CompositePrimaryKey, Model, QuerySet

from ultimate_jobs import jsoncodec
from ultimate_jobs.context import JobContext
from ultimate_jobs.durations import Duration
from ultimate_jobs.errors import (
    X_EXPORT_SOURCE_INVALID,
    X_INVARIANT,
    X_JOB_DECLARATION_INVALID,
    JobsError,
    Terminal,
)
from ultimate_jobs.factories.kit import declare, input_key, missing_tenant, named, require_callables, whole_number
from ultimate_jobs.handle import JobHandle
from ultimate_jobs.inputs import IdempotencyKey, Tenant
from ultimate_jobs.retry import Retry

__all__ = ["FORMATS", "encode_rows", "export_rows", "render_prefix", "write_object"]

Format = Literal["csv", "ndjson"]
FORMATS: tuple[Format, ...] = ("csv", "ndjson")
DEFAULT_PAGE = 10_000
MAX_PAGE = 1_000_000
_FORMULA_LEADS = ("=", "+", "-", "@")
_RAW_LEADS = ("\t", "\r")  # guarded as they are, whatever follows
# What a spreadsheet skips before it reads a formula: whitespace, controls (NUL, LF, ...), format
# characters (zero-width spaces, the BOM) and the separators.
_SKIPPED = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp"})


# A path: a format string over the input (``"exports/{org}/orders"``) or a callable(**input) -> str.
Prefix = str | Callable[..., str]


class ExportResult(TypedDict):
    """An export's result: the parts written, the rows in them, the run's prefix and each object."""

    pages: int
    rows: int
    prefix: str
    objects: list[str]


def export_rows(*, name: str, tenant: Tenant | None = None, source: Callable[..., QuerySet[Model, object]],
                fields: Sequence[str], storage: Callable[[], Storage], prefix: Prefix, format: Format = "csv",
                page: int = DEFAULT_PAGE, idempotency_key: IdempotencyKey | None = None, queue: str = "default",
                retry: Retry | int | None = None, timeout: Duration | None = None) -> JobHandle[..., ExportResult]:
    """Declare an export; see the module docstring for every option, the objects and the result.

    ``source(ctx, **input)`` answers the QuerySet. The handle's input is the app's keyword-only
    input, which no ParamSpec literal spells: it answers ``JobHandle[..., ExportResult]``."""
    name, owner = named("export_rows", name)
    if tenant is None:
        raise missing_tenant(owner=owner, why="an export reads rows someone can download",
                             fix="Pass tenant=NO_TENANT for tables without tenants, or the input's tenant.")
    require_callables(owner=owner, source=source, storage=storage)
    fields = check_fields(owner, fields)
    check_format(owner, format)
    check_prefix(owner, prefix)
    page = whole_number(page, owner=owner, option="page", high=MAX_PAGE, unit="rows", fix=f"Set page={DEFAULT_PAGE}.")

    def body(ctx: JobContext, /, **input: Any) -> ExportResult:
        queryset = check_source(owner, source(ctx, **input))
        run_prefix = f"{render_prefix(prefix, input)}/{ctx.run_id}"
        target = storage()
        pages = rows = 0
        objects: list[str] = []
        cursor: Any = None
        while True:
            index = pages

            def part(at: int = index, after: Any = cursor) -> dict[str, Any]:
                return _page(queryset, fields, format, target, run_prefix, at, after, page)

            out = ctx.step.run(f"part:{index}", part)
            if out["object"] is not None:
                objects.append(out["object"])
                pages += 1
            rows += out["rows"]
            cursor = out["cursor"]
            ctx.progress(rows, note=f"part {index}")
            if out["rows"] < page:
                break
        return {"pages": pages, "rows": rows, "prefix": run_prefix, "objects": objects}

    return declare(body, label=f"export_rows[{name}]", doc=f"The export {name!r}.", name=name,
                   idempotency_key=input_key(name, idempotency_key), tenant=tenant, queue=queue, retry=retry,
                   timeout=timeout)


def _page(queryset: QuerySet[Model, object], fields: Sequence[str], format: Format, storage: Storage,
          run_prefix: str, index: int, after: Any, size: int) -> dict[str, Any]:
    ordered = queryset.order_by("pk")
    if after is not None:
        ordered = ordered.filter(pk__gt=after)
    found = list(ordered.values_list("pk", *fields)[:size])
    if not found and index > 0:
        return {"cursor": after, "rows": 0, "object": None}  # the previous page ended exactly at the last row
    object_name = f"{run_prefix}/part-{index:05d}.{format}"
    write_object(storage, object_name, encode_rows((row[1:] for row in found), fields, format))
    last = jsoncodec.loads(jsoncodec.dumps(found[-1][0])) if found else after  # the form the step stores
    return {"cursor": last, "rows": len(found), "object": object_name}


def encode_rows(rows: Iterable[Sequence[object]], fields: Sequence[str], format: Format) -> bytes:
    """One part's bytes: CSV (header first, RFC 4180 quoting, the formula guard) or NDJSON."""
    if format == "ndjson":
        return b"".join((jsoncodec.dumps(dict(zip(fields, row, strict=True))) + "\n").encode() for row in rows)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(fields)
    writer.writerows([_cell(value) for value in row] for row in rows)
    return out.getvalue().encode()


def _cell(value: object) -> object:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, str):
        return "'" + value if formula_like(value) else value
    if isinstance(value, int | float):
        return value
    return str(value)  # Decimal, UUID and the like: their text, never guarded (not app-entered strings)


def formula_like(value: str) -> bool:
    """Whether a spreadsheet could read ``value`` as a formula: it starts with TAB or CR, or its
    first character that is not whitespace, a control or a format character reads, under NFKC, as
    ``=``, ``+``, ``-`` or ``@`` (so a leading NUL, space or LF and the fullwidth ``＝＋－＠`` are
    caught). Only the leading characters are normalised, one at a time."""
    if value.startswith(_RAW_LEADS):
        return True
    for char in value:
        if char.isascii() and char.isalnum():
            return False
        normal = unicodedata.normalize("NFKC", char)
        if not normal or all(c.isspace() or unicodedata.category(c) in _SKIPPED for c in normal):
            continue
        return normal.startswith(_FORMULA_LEADS)
    return False


def write_object(storage: Storage, name: str, data: bytes) -> None:
    """Write ``data`` as exactly ``name``, replacing an earlier write of it (a replayed page)."""
    if storage.exists(name):
        storage.delete(name)
    saved = storage.save(name, ContentFile(data))
    if saved != name:
        raise Terminal(f"the storage saved {name!r} as {saved!r}; a part must keep its name so a replay "
                       "overwrites it.", code=X_INVARIANT, fix="Use a storage that saves a name it was given as is.")


def render_prefix(prefix: Prefix, input: Mapping[str, Any]) -> str:
    rendered = prefix(**input) if callable(prefix) else prefix.format_map(input)
    if not isinstance(rendered, str) or not rendered.strip("/"):
        raise Terminal(f"prefix answered {rendered!r}; it must be a non-empty path.", code=X_JOB_DECLARATION_INVALID)
    return rendered.strip("/")


def check_source(owner: str, source: object) -> QuerySet[Model, object]:
    """``source`` when it is an unsliced QuerySet keyed by one column; else terminal."""
    if not isinstance(source, QuerySet):
        problem = f"answered {type(source).__name__}, not a QuerySet"
    elif source.query.is_sliced:
        problem = "answered a sliced QuerySet (the pass pages it by primary key itself)"
    elif isinstance(source.model._meta.pk, CompositePrimaryKey):
        problem = f"selects {source.model.__name__}, whose primary key spans several columns"
    else:
        return source
    raise Terminal(f"{owner}: source {problem}.", code=X_EXPORT_SOURCE_INVALID)


def check_fields(owner: str, fields: object) -> tuple[str, ...]:
    if isinstance(fields, str) or not isinstance(fields, Sequence) or not fields or not all(
            isinstance(f, str) and f for f in fields) or len(set(fields)) != len(fields):
        raise JobsError(X_JOB_DECLARATION_INVALID, f"{owner}: fields={fields!r} is not a list of distinct field "
                        "names.", 'Pass fields=["id", "email", ...] (what leaves the building is the app\'s choice).')
    return tuple(fields)


def check_format(owner: str, format: object) -> None:
    if format not in FORMATS:
        raise JobsError(X_JOB_DECLARATION_INVALID, f"{owner}: format={format!r} is not one of {', '.join(FORMATS)}.",
                        'Pass format="csv" or format="ndjson".')


def check_prefix(owner: str, prefix: object, *, option: str = "prefix",
                 fix: str = 'Pass prefix="exports/{org}/orders".') -> None:
    if not (callable(prefix) or (isinstance(prefix, str) and prefix.strip("/"))):
        raise JobsError(X_JOB_DECLARATION_INVALID, f"{owner}: {option}={prefix!r} is neither a non-empty path nor "
                        "a callable(**input) -> str.", fix)
