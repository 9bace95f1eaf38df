"""Internal: how the management commands print for a human — tables and lines, safe for a terminal.

``Screen(stream)`` draws with ``rich`` when it is installed and in plain, aligned text when it is
not: ``rich`` is optional (``pip install rich``), and a plain ``pip install ultimate-jobs`` must run
every command the docs show. ``--json`` never comes through here.

Everything printed passes ``clean()`` first: a payload, an error or a task name is data an
attacker may have written, and C0/C1 control characters (ESC, CSI, BEL, ...) reaching a terminal
can move the cursor, rewrite the screen or set the window title; Unicode's bidirectional
controls (U+202A-U+202E, U+2066-U+2069, the marks U+200E/U+200F/U+061C) and line separators
(U+2028/U+2029) can make a job name or an error read as something else. They are shown escaped
(``\\x1b``, ``\\u202e``), never emitted; tab and newline are kept in free text and flattened in
table cells. ``rich`` never interprets stored text: no markup (``[bold]``), no emoji codes
(``:warning:`` prints as typed). ``json_text`` escapes the same characters in ``--json`` output
(as JSON ``\\uXXXX`` escapes: the same value to a parser, inert on a terminal).
"""

from __future__ import annotations

import errno
import json
import re
from collections.abc import Mapping, Sequence
from typing import IO, Any

try:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text
except ImportError:  # optional: without rich every command prints plain text
    Console = None  # type: ignore[assignment,misc]

MAX_CELL = 200
# Bidirectional controls and marks, and the Unicode line and paragraph separators.
_UNICODE_CONTROLS = "\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f" + _UNICODE_CONTROLS + "]")
_CELL_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f" + _UNICODE_CONTROLS + "]")
_JSON_UNSAFE = re.compile("[\x7f-\x9f" + _UNICODE_CONTROLS + "]")  # json.dumps escapes C0 itself


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def json_text(data: Any) -> str:
    """``data`` as indented JSON for ``--json``: non-ASCII kept readable, but C1 controls, bidi
    controls and line separators written as ``\\uXXXX`` escapes (the same JSON value)."""
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(data, indent=2, ensure_ascii=False))


def clean(text: str, *, cell: bool = False) -> str:
    """``text`` with every C0/C1 control character (but tab and newline, outside a cell) shown as
    ``\\xNN``; in a cell, tab and newline become a space so a row stays one line."""
    if cell:
        text = text.replace("\n", " ").replace("\t", " ")
        return _CELL_CONTROLS.sub(_escaped, text)
    return _CONTROLS.sub(_escaped, text)


class Screen:
    """Lines and tables for one output stream; ``print`` keeps ``rich``'s ``markup=`` keyword so
    callers need not know which renderer draws."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.rich: Any = None
        if Console is not None:
            width = None if stream.isatty() else 160
            # Stored text is data: no markup, no ":emoji:" codes, no highlighting.
            self.rich = Console(file=stream, width=width, highlight=False, soft_wrap=False, markup=False,
                                emoji=False)
            # A closed pipe (`jobs stats | head`) is for the command to end (exit 141), as it does
            # without rich; rich's own answer is exit 1, which the commands use for a refusal.
            self.rich.on_broken_pipe = _reader_gone

    def print(self, text: object = "", *, markup: bool = False) -> None:
        """One line of text, controls escaped; never interpreted as ``rich`` markup."""
        line = clean(str(text))
        if self.rich is not None:
            self.rich.print(Text(line))
        else:
            self.stream.write(line + "\n")

    def table(self, rows: Sequence[Mapping[str, Any]], columns: Sequence[str], title: str | None = None,
              empty: str = "(none)") -> None:
        """``rows`` under a header of ``columns`` (None shows as ``-``, long cells end in an ellipsis)."""
        if not rows:
            self.print(f"{title}: {empty}" if title else empty)
            return
        if title:
            self.print(title)
        cells = [[cell(row.get(c)) for c in columns] for row in rows]
        if self.rich is not None:
            table = Table(*columns)
            for line in cells:
                table.add_row(*(Text(c) for c in line))
            self.rich.print(table)
            return
        widths = [max(len(c), *(len(line[i]) for line in cells)) for i, c in enumerate(columns)]
        for line in [list(columns), ["-" * w for w in widths], *cells]:
            self.stream.write("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() + "\n")


def _reader_gone() -> None:
    raise BrokenPipeError(errno.EPIPE, "the reader of the output went away")


def cell(value: Any) -> str:
    """One table cell: ``-`` for None, JSON for a dict or list, at most ``MAX_CELL`` characters."""

    if value is None:
        return "-"
    if isinstance(value, dict | list):
        value = json.dumps(value, ensure_ascii=False)
    text = clean(str(value), cell=True)
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "\u2026"
