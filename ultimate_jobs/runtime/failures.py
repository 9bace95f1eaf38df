"""Internal: the stored form of an error (``format_error``), shared by the attempt, its steps and its unwind."""

from __future__ import annotations

import traceback

from ultimate_jobs.redact import redact_text

MAX_ERROR_CHARS = 8000


def format_error(error: BaseException) -> str:
    """The stored error: type, message and the traceback, capped so one row stays small, with
    secrets masked before they are ever written (``redact.redact_text``)."""
    text = redact_text("".join(traceback.format_exception(error)).strip()) or ""
    if len(text) > MAX_ERROR_CHARS:
        text = text[: MAX_ERROR_CHARS // 2] + "\n...\n" + text[-MAX_ERROR_CHARS // 2:]
    return text.replace("\x00", "\\x00")
