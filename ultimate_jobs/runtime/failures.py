"""Internal: the stored form of an error (``format_error``), shared by the attempt, its steps and its unwind."""

from __future__ import annotations

import traceback

from ultimate_jobs.redact import REDACTED, redact_text

MAX_ERROR_CHARS = 8000


def format_error(error: BaseException, *, sensitive: bool = False) -> str:
    """The stored error: type, message and the traceback, capped so one row stays small, with
    secrets masked before they are ever written (``redact.redact_text``).

    For a ``sensitive=True`` job every message in the chain is ``[redacted]`` (a message is
    where the input's values end up: ``ValueError(f"bad card {card}")``); the exception types
    and the traceback's frames stay, so the failure can still be found."""
    if sensitive:
        text = "".join(_without_messages(error)).strip()
    else:
        text = redact_text("".join(traceback.format_exception(error)).strip()) or ""
    if len(text) > MAX_ERROR_CHARS:
        text = text[: MAX_ERROR_CHARS // 2] + "\n...\n" + text[-MAX_ERROR_CHARS // 2:]
    return text.replace("\x00", "\\x00")


def _without_messages(error: BaseException) -> list[str]:
    chain: list[BaseException] = []
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append(current)
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    lines: list[str] = []
    for item in reversed(chain):
        if lines:
            lines.append("\nThe above exception led to the next one:\n\n")
        if item.__traceback__ is not None:
            lines.append("Traceback (most recent call last):\n")
            lines.extend(traceback.format_tb(item.__traceback__))
        kind = type(item)
        lines.append(f"{kind.__module__}.{kind.__qualname__}: {REDACTED}\n")
    return lines
