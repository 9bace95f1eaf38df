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
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

BOM = b"\xef\xbb\xbf"
# A run of blank lines: one character class repeated (no group), so matching a million of them
# needs no backtracking state per line; it ends at the run's last newline.
_BLANK_LINES = re.compile(rb"[ \t\r\f\v\n]*\n")
_BLANK_BYTES = frozenset(b" \t\r\f\v\n")


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
    """A page cut at its last whole record: its non-blank records (cut one at a time as they are
    read, so a page of a million blank lines or one-byte rows never holds a million objects), the
    bytes consumed, the lines consumed, and the first record over the size limit (its offset), if any."""

    records: Iterable[Record]
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


def spans(buf: bytes, cut: int, *, quoted: bool) -> Iterator[tuple[int, int, int, int]]:
    """Each record of ``buf[:cut]`` as ``(start, data end, next start, first line index)``, plain
    integers: a newline inside quotes is data; at the cut the rest is one (maybe malformed) record."""
    pos = line = 0
    while pos < cut:
        blank = _BLANK_LINES.match(buf, pos, cut) if buf[pos] in _BLANK_BYTES else None
        if blank is not None:  # a run of blank lines at a record start: skipped in one match
            line += buf.count(b"\n", pos, blank.end())
            pos = blank.end()
            continue
        first, first_line, odd = pos, line, False
        while True:
            newline = buf.find(b"\n", pos, cut)
            stop = cut if newline < 0 else newline
            if quoted and buf.count(b'"', pos, stop) % 2:
                odd = not odd
            line += 1
            pos = stop + 1
            if not odd or pos >= cut:
                break
        yield first, stop, min(pos, cut), first_line


def split_records(buf: bytes, *, offset: int, line: int, at_eof: bool, quoted: bool,
                  max_record_bytes: int) -> Split:
    """Cut ``buf`` (read from file offset ``offset``, whose first record starts on ``line``) into
    whole records. At end of file the unterminated tail is a record too. One pass over the
    integers checks every record's size and counts the lines; the records themselves are cut as
    the caller iterates, blank ones (whitespace only, CRLF included) skipped."""
    cut = len(buf) if at_eof else last_record_end(buf, quoted=quoted)
    for start, stop, _, first_line in spans(buf, cut, quoted=quoted):
        if stop - start > max_record_bytes:
            return Split((), start, first_line, offset + start)
    lines = buf.count(b"\n", 0, cut) + (1 if cut and buf[cut - 1:cut] != b"\n" else 0)
    return Split(_records(buf, cut, offset=offset, line=line, quoted=quoted), cut, lines, None)


def _records(buf: bytes, cut: int, *, offset: int, line: int, quoted: bool) -> Iterator[Record]:
    for start, stop, after, first_line in spans(buf, cut, quoted=quoted):
        data = buf[start:stop]
        if not data.strip():
            continue
        yield Record(data[:-1] if data.endswith(b"\r") else data, offset + start, line + first_line, offset + after)


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
    except RecursionError:  # nested deeper than the decoder goes: one refused row, not a failed import
        raise Malformed("too_deep") from None
    if not isinstance(value, dict):
        raise Malformed("malformed")
    return value
