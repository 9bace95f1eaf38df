"""Internal: one page of an import — read from the checkpointed byte offset, cut at the last whole
record, each row checked (the header's columns, the ``Form``), the accepted rows handed to
``handle`` in batches, the refused ones written to the page's error report.

A page holds at most ``page_bytes`` (or one record of ``max_record_bytes`` when a record is longer
than a page) and its rows: the file is never in memory. What the step stores is the next offset and
counters, never a row.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.core.files.storage import Storage

from ultimate_jobs import jsoncodec
from ultimate_jobs.context import JobContext
from ultimate_jobs.errors import (
    X_IMPORT_HEADER_MISMATCH,
    X_IMPORT_RECORD_TOO_LARGE,
    X_IMPORT_SOURCE_INVALID,
    X_IMPORT_TOO_MANY_ERRORS,
    Terminal,
)
from ultimate_jobs.factories.export_rows import write_object
from ultimate_jobs.factories.import_rows.records import (
    BOM,
    Malformed,
    Record,
    Split,
    parse_csv,
    parse_ndjson,
    split_records,
)

if TYPE_CHECKING:
    from ultimate_jobs.factories.import_rows.declaration import Import


@dataclass(frozen=True, slots=True)
class ImportBatch:
    """Rows handed to ``handle``: cleaned dicts (the ``Form``'s ``cleaned_data``, or the columns'
    text without a form), the run's input and context, and the page's index."""

    rows: list[dict[str, Any]]
    input: dict[str, Any]
    ctx: JobContext
    page: int


def read_at(imp: Import, storage: Storage, key: str, offset: int, size: int) -> tuple[bytes, bool]:
    """``size`` bytes from ``offset`` (and whether that reached the end of the object)."""
    try:
        handle = storage.open(key, "rb")
    except (FileNotFoundError, OSError) as exc:
        raise Terminal(f"import_rows {imp.name!r}: the object {key!r} cannot be opened ({type(exc).__name__}).",
                       code=X_IMPORT_SOURCE_INVALID) from None
    with handle:
        handle.seek(offset)
        data = handle.read(size + 1)  # one byte more says whether the end was reached
    return data[:size], len(data) <= size


def read_page(imp: Import, storage: Storage, key: str, offset: int,
              line: int) -> tuple[Iterable[Record], int, int, bool]:
    """The whole records from ``offset``: ``(records, next offset, next line, at end)``; the
    records are cut as they are iterated (blank ones skipped), so a page holds its bytes, not a
    list of its records."""
    quoted = imp.format == "csv"
    buf, at_eof = read_at(imp, storage, key, offset, imp.page_bytes)
    split = split_records(buf, offset=offset, line=line, at_eof=at_eof, quoted=quoted,
                          max_record_bytes=imp.max_record_bytes)
    if split.too_large_at is None and split.consumed == 0 and not at_eof:
        # No record ends inside a page: read the one record alone, up to its limit (plus CRLF).
        buf, at_eof = read_at(imp, storage, key, offset, imp.max_record_bytes + 2)
        split = split_records(buf, offset=offset, line=line, at_eof=at_eof, quoted=quoted,
                              max_record_bytes=imp.max_record_bytes)
        if split.too_large_at is None and split.consumed == 0 and not at_eof:
            split = Split((), 0, 0, offset)
    if split.too_large_at is not None:
        raise Terminal(f"import_rows {imp.name!r}: the record at byte {split.too_large_at} of {key!r} is over "
                       f"max_record_bytes={imp.max_record_bytes:,}; not read on.", code=X_IMPORT_RECORD_TOO_LARGE)
    return split.records, offset + split.consumed, line + split.lines, at_eof and split.consumed == len(buf)


def start_offset(imp: Import, storage: Storage, key: str) -> int:
    """Where the first record starts: past a UTF-8 BOM, if the object opens with one."""
    head, _ = read_at(imp, storage, key, 0, len(BOM))
    return len(BOM) if head == BOM else 0


def read_header(imp: Import, storage: Storage, key: str) -> dict[str, Any]:
    """The first non-blank record: the columns in file order; refused unless exactly ``columns``."""
    offset, line = start_offset(imp, storage, key), 1
    while True:
        records, next_offset, next_line, at_end = read_page(imp, storage, key, offset, line)
        for record in records:
            if not record.data.strip():
                continue
            try:
                header = parse_csv(record.data)
            except Malformed:
                header = []
            if sorted(header) != sorted(imp.columns) or len(set(header)) != len(header):
                raise Terminal(f"import_rows {imp.name!r}: {key!r} has the header {header!r}; it must name exactly "
                               f"{sorted(imp.columns)!r}.", code=X_IMPORT_HEADER_MISMATCH)
            return {"header": header, "offset": record.end, "line": record.line + 1 + record.data.count(b"\n")}
        if at_end or next_offset == offset:
            raise Terminal(f"import_rows {imp.name!r}: {key!r} has no header line (empty, or only a BOM and blank "
                           "lines).", code=X_IMPORT_HEADER_MISMATCH)
        offset, line = next_offset, next_line


def run_page(imp: Import, ctx: JobContext, input: dict[str, Any], *, key: str, index: int, offset: int, line: int,
             header: list[str] | None, refused_before: int, error_prefix: str) -> dict[str, Any]:
    """Read, check, hand over and report one page; answer its checkpoint."""
    storage = imp.storage()
    records, next_offset, next_line, at_end = read_page(imp, storage, key, offset, line)
    errors: list[dict[str, Any]] = []
    rows = 0
    batch: list[dict[str, Any]] = []

    def flush() -> None:
        nonlocal rows
        if batch:
            imp.handle_batch(ImportBatch(rows=list(batch), input=input, ctx=ctx, page=index))
            rows += len(batch)
            batch.clear()

    form = RowForm(imp.form) if imp.form is not None else None
    for record in records:
        if not record.data.strip():
            continue
        row = check_row(imp, record, header, errors, form)
        if row is not None:
            batch.append(row)
        if refused_before + len(errors) > imp.max_row_errors:
            report(imp, errors, error_prefix, index)
            raise Terminal(f"import_rows {imp.name!r}: {refused_before + len(errors)} refused rows, over "
                           f"max_row_errors={imp.max_row_errors}; the report is under {error_prefix!r}.",
                           code=X_IMPORT_TOO_MANY_ERRORS)
        if len(batch) >= imp.batch:
            flush()
    flush()
    report(imp, errors, error_prefix, index)
    return {"offset": next_offset, "line": next_line, "rows": rows, "refused": len(errors), "done": at_end}


class RowForm:
    """One bound instance of the app's ``Form`` per page, rebound to each row: a new ``Form``
    deep-copies every field, which cost more than the whole rest of the import (bench/import_rows.py).
    Cleaning reads only ``data``, so a rebound instance cleans a row exactly as a fresh one would."""

    def __init__(self, form_class: Any) -> None:
        self.form = form_class(data={})

    def clean(self, data: dict[str, Any]) -> tuple[dict[str, Any] | None, Any]:
        """``(cleaned_data, None)`` for a valid row, ``(None, errors.as_data())`` otherwise."""
        form = self.form
        form.data = data
        form._errors = None  # full_clean runs again on the next is_valid()
        if form.is_valid():
            return dict(form.cleaned_data), None
        return None, form.errors.as_data()


def check_row(imp: Import, record: Record, header: list[str] | None, errors: list[dict[str, Any]],
              form: RowForm | None) -> Any:
    """The row's cleaned dict, or None with its refusals appended as ``{line, field, code}``."""
    try:
        if header is not None:
            values = parse_csv(record.data)
            if len(values) != len(header):
                errors.append({"line": record.line, "field": None, "code": "columns"})
                return None
            data: dict[str, Any] = dict(zip(header, values, strict=True))
        else:
            data = parse_ndjson(record.data)
            unknown = sorted(set(data) - set(imp.columns))
            if unknown:
                errors.extend({"line": record.line, "field": name, "code": "unknown_field"} for name in unknown)
                return None
    except Malformed as bad:
        errors.append({"line": record.line, "field": None, "code": bad.code})
        return None
    if form is None:
        return {name: data.get(name) for name in imp.columns}
    try:
        cleaned, problems_by_field = form.clean({name: data[name] for name in imp.columns
                                                 if name in data and data[name] is not None})
    except RecursionError:  # a value nested deeper than a field's cleaning can walk: this row only
        errors.append({"line": record.line, "field": None, "code": "too_deep"})
        return None
    if cleaned is not None:
        return cleaned
    for field, problems in problems_by_field.items():
        for problem in problems:  # never the value: the report would keep what the app refused
            errors.append({"line": record.line, "field": None if field == "__all__" else field,
                           "code": problem.code or "invalid"})
    return None


def report(imp: Import, errors: list[dict[str, Any]], error_prefix: str, index: int) -> None:
    if errors:
        data = b"".join((jsoncodec.dumps(e) + "\n").encode() for e in errors)
        write_object(imp.errors_storage(), f"{error_prefix}/errors-{index:05d}.ndjson", data)
