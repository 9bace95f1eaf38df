"""Internal: how the management commands print for a human — tables and lines, safe for a terminal.

``Screen(stream)`` draws with ``rich`` when it is installed and in plain, aligned text when it is
not: ``rich`` is optional (``pip install rich``), and a plain ``pip install ultimate-jobs`` must run
every command the docs show. ``--json`` never comes through here.

Everything printed passes ``clean()`` first: a payload, an error or a task name is data an
attacker may have written, and C0/C1 control characters (ESC, CSI, BEL, ...) reaching a terminal
can move the cursor, rewrite the screen or set the window title. They are shown escaped
(``\\x1b``), never emitted; tab and newline are kept in free text and flattened in table cells.
"""

from __future__ import annotations

import errno
import json
import re
from collections.abc import Mapping, Sequence
from typing import IO, Any

try:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table
except ImportError:  # optional: without rich every command prints plain text
    Console = None  # type: ignore[assignment,misc]

MAX_CELL = 200
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CELL_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f]")


def _escaped(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


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
            self.rich = Console(file=stream, width=width, highlight=False, soft_wrap=False)
            # A closed pipe (`jobs stats | head`) is for the command to end (exit 141), as it does
            # without rich; rich's own answer is exit 1, which the commands use for a refusal.
            self.rich.on_broken_pipe = _reader_gone

    def print(self, text: object = "", *, markup: bool = False) -> None:
        """One line of text, controls escaped; never interpreted as ``rich`` markup."""
        line = clean(str(text))
        if self.rich is not None:
            self.rich.print(line, markup=False)
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
                table.add_row(*(escape(c) for c in line))
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
