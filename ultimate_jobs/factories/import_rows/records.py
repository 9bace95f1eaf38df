"""Internal: where records end in a page of bytes, and what each record says.

Record ends are found on BYTES, never on decoded text: a newline byte (0x0A) is never part of a
multi-byte UTF-8 character, so a character split by a page edge sits in the unfinished tail and
arrives whole in the next page, which starts at the checkpointed offset. In CSV a newline inside
``"..."`` is data: the quote parity before a newline says whether it ends a record (a page always
starts outside quotes, at a record boundary). CRLF and a leading UTF-8 BOM read as nothing.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from typing import Any

BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True, slots=True)
class Record:
    """One record: its bytes (no line terminator), its byte offset in the file, its first line,
    and the offset just past its terminator."""

    data: bytes
    offset: int
    line: int
    end: int


@dataclass(frozen=True, slots=True)
class Split:
    """A page cut at its last whole record: the records, the bytes consumed, the lines consumed,
    and the first record over the size limit (its offset), if any."""

    records: list[Record]
    consumed: int
    lines: int
    too_large_at: int | None


def last_record_end(buf: bytes, *, quoted: bool) -> int:
    """The index just past the last record-ending newline in ``buf``, or 0 when there is none."""
    end = buf.rfind(b"\n")
    if not quoted or end < 0:
        return end + 1
    quotes = buf.count(b'"', 0, end)
    while end >= 0 and quotes % 2:  # inside a quoted field: that newline is data
        previous = buf.rfind(b"\n", 0, end)
        quotes -= buf.count(b'"', previous + 1, end)
        end = previous
    return end + 1


def split_records(buf: bytes, *, offset: int, line: int, at_eof: bool, quoted: bool,
                  max_record_bytes: int) -> Split:
    """Cut ``buf`` (read from file offset ``offset``, whose first record starts on ``line``) into
    whole records. At end of file the unterminated tail is a record too."""
    cut = len(buf) if at_eof else last_record_end(buf, quoted=quoted)
    body = buf[:cut]
    pieces = body[:-1].split(b"\n") if body.endswith(b"\n") else (body.split(b"\n") if body else [])
    records: list[Record] = []
    start = 0  # where the next physical line starts, in buf
    first = 0  # where the record being gathered starts, and its line index
    first_line = 0
    pending: list[bytes] = []
    odd = False
    for index, piece in enumerate(pieces):
        if not pending:
            first, first_line = start, index
        pending.append(piece)
        start += len(piece) + 1
        if quoted and piece.count(b'"') % 2:
            odd = not odd
        if odd and index < len(pieces) - 1:
            continue  # a newline inside quotes; at the end of the file the rest is one (malformed) record
        data = b"\n".join(pending) if len(pending) > 1 else piece
        pending = []
        if len(data) > max_record_bytes:
            return Split(records, first, first_line, offset + first)
        records.append(Record(data[:-1] if data.endswith(b"\r") else data, offset + first, line + first_line,
                              offset + min(start, cut)))
    return Split(records, cut, len(pieces), None)


class Malformed(ValueError):
    """A record that is not one CSV row or one JSON object; ``code`` is what the report says."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


def parse_csv(data: bytes) -> list[str]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise Malformed("encoding") from None
    try:
        return next(csv.reader((text,), strict=True))
    except (csv.Error, StopIteration):
        raise Malformed("malformed") from None


def parse_ndjson(data: bytes) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except UnicodeDecodeError:
        raise Malformed("encoding") from None
    except ValueError:
        raise Malformed("malformed") from None
    if not isinstance(value, dict):
        raise Malformed("malformed")
    return value
