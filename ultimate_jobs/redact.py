"""Internal: the one redactor every surface (ops, admin, CLI, logs, stored errors) passes values through.

A ``sensitive=True`` job shows ``[redacted]`` for its payload, result and step outputs; any
mapping key containing one of ``REDACT_KEYS`` (case-insensitive: ``password``, ``api_key``,
``Authorization`` ...) has its value masked at any depth. Free text (errors, log lines) has
``key=value`` / ``"key": "value"`` / ``Authorization: Bearer ...`` pairs masked; a JSON text
cut short (the admin's payload preview reads only a prefix) is masked token by token, so a
secret cut in half is still masked. ``RedactingFilter`` applies the text rule to every record
of the ``ultimate_jobs`` logger (installed by the app config).
"""

from __future__ import annotations

import functools
import logging
import re
from typing import Any

from ultimate_jobs.conf import get_settings

REDACTED = "[redacted]"
_SPACE = " \t\r\n"


def redact(value: Any, *, sensitive: bool = False) -> Any:
    if sensitive and value is not None:
        return REDACTED
    keys = get_settings().REDACT_KEYS
    return _walk(value, keys)


def _walk(value: Any, keys: tuple[str, ...]) -> Any:
    if isinstance(value, dict):
        return {k: (REDACTED if isinstance(k, str) and _secret(k, keys) else _walk(v, keys))
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_walk(v, keys) for v in value]
    return value


def _secret(key: str, keys: tuple[str, ...]) -> bool:
    lowered = key.lower()
    return any(k in lowered for k in keys)


@functools.lru_cache(maxsize=8)
def _text_pattern(keys: tuple[str, ...]) -> re.Pattern[str]:
    alternatives = "|".join(re.escape(k) for k in keys)
    return re.compile(
        r"""(?P<key>["']?[\w-]*(?:""" + alternatives + r""")[\w-]*["']?\s*[:=]\s*)"""
        # An earlier pass's marker is a value of its own, so masking twice changes nothing.
        r"""(?P<value>\[redacted\]|"[^"]*"|'[^']*'|(?:Bearer\s+|Basic\s+|Token\s+)?[^\s,;}'")\]]+)""",
        re.IGNORECASE,
    )


def redact_text(text: str | None, *, sensitive: bool = False) -> str | None:
    """Mask ``key=value`` / ``"key": "value"`` pairs whose key is secret inside free text (errors, logs)."""
    if text is None:
        return None
    keys = get_settings().REDACT_KEYS
    if not keys:
        return text
    return _text_pattern(keys).sub(lambda m: m.group("key") + REDACTED, text)


def preview_json(text: str | None, *, limit: int = 120, sensitive: bool = False) -> str:
    """A short, redacted preview of a JSON document given as (a prefix of) its text.

    Secret keys' values are replaced whole — a string, a number or a nested container — even
    when the text stops in the middle of one; the result is cut to ``limit`` characters.
    """
    if text is None:
        return ""
    if sensitive:
        return REDACTED
    masked = _mask_json(text, get_settings().REDACT_KEYS)
    return masked if len(masked) <= limit else masked[: limit - 1] + "\u2026"


def _string_end(text: str, start: int) -> int:
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == '"':
            return i + 1
        else:
            i += 1
    return len(text)


def _value_end(text: str, start: int) -> int:
    if text[start] not in "{[":
        i = start
        while i < len(text) and text[i] not in ",}]" + _SPACE:
            i += 1
        return i
    depth, i = 0, start
    while i < len(text):
        char = text[i]
        if char == '"':
            i = _string_end(text, i)
            continue
        if char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return len(text)


def _mask_json(text: str, keys: tuple[str, ...]) -> str:
    out: list[str] = []
    stack: list[str] = []
    want_key = mask_next = False
    i = 0
    while i < len(text):
        char = text[i]
        if mask_next and char not in _SPACE + ":":
            i = _string_end(text, i) if char == '"' else _value_end(text, i)
            out.append('"' + REDACTED + '"')
            mask_next = False
            continue
        if char == '"':
            end = _string_end(text, i)
            if stack and stack[-1] == "{" and want_key:
                want_key = False
                mask_next = bool(keys) and _secret(text[i + 1:end - 1], keys)
            out.append(text[i:end])
            i = end
            continue
        if char in "{[":
            stack.append(char)
            want_key = char == "{"
        elif char in "}]":
            if stack:
                stack.pop()
            want_key = False
        elif char == ",":
            want_key = bool(stack) and stack[-1] == "{"
        out.append(char)
        i += 1
    return "".join(out)


class RedactingFilter(logging.Filter):
    """Masks secrets in a record's message and traceback before any handler sees it."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = redact_text(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and not record.exc_text:
            record.exc_text = redact_text(logging.Formatter().formatException(record.exc_info))
        return True
