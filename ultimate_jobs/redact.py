"""Internal: the one redactor every surface (ops, admin, CLI, logs, stored errors, spans) passes values through.

A ``sensitive=True`` job shows ``[redacted]`` for its payload, result, step outputs and error
text. Otherwise a secret key's value is masked at any depth: a key is secret when it contains
one of ``REDACT_KEYS`` plus ``REDACT_KEYS_EXTRA``, compared case-insensitively with ``-`` and
``_`` alike (``X-Api-Key`` matches ``api_key``). Name/value pairs count as keys too
(``[["Authorization", "Bearer ..."]]``, ``{"name": "Authorization", "value": "..."}``), and
a password inside a URL (``postgres://u:PASS@h``) is masked in any string.

Free text (errors, log lines, span events) gets the same rules as text: ``key=value``,
``key: value``, ``"key": "value"`` and quoted pairs; a quoted or bracketed value is masked
whole, and an unquoted one up to the end of its line, a delimiter (``, ; & ) ] }``) or the next
``word=`` pair, so ``password = my secret`` hides ``my secret``, not just ``my``. A JSON text
cut short (the admin's payload preview reads only a prefix) is masked token by token, so a
secret cut in half is still masked. Redaction is idempotent: redacting text that was already
redacted changes nothing (stored errors are redacted before they are written, and surfaces
redact again when they show them). ``RedactingFilter`` applies the text rule to every record of
the ``ultimate_jobs`` logger (installed by the app config).
"""

from __future__ import annotations

import functools
import logging
import re
from typing import Any

from ultimate_jobs.conf import get_settings

REDACTED = "[redacted]"
_SPACE = " \t\r\n"
_PAIR_NAMES = frozenset({"name", "key", "header", "field"})
_URL = r"(?P<pre>\b[a-z][a-z0-9+.-]*://[^\s:/@'\"]*:)(?P<pw>[^\s@/?#'\"]+)"
_URL_PASSWORD = re.compile(_URL + r"(?=@)", re.IGNORECASE)
# In a preview cut short, a URL's password may run to the end of the text (its "@" was cut off).
_URL_PASSWORD_CUT = re.compile(_URL + r"(?=@|$)", re.IGNORECASE)
# The end of an unquoted value: before the next ``word=`` pair, a delimiter, a line end, the text's end.
_BARE_VALUE = re.compile(r"""[^\n,;&}\])'"]*?(?=\s+[\w.-]+\s*[:=]|\s*(?:[\n,;&}\])'"]|$))""")


def redact_keys() -> tuple[str, ...]:
    """The secret key fragments in force: ``REDACT_KEYS`` plus ``REDACT_KEYS_EXTRA``, normalized."""
    settings = get_settings()
    return tuple(dict.fromkeys(_norm(k) for k in (*settings.REDACT_KEYS, *settings.REDACT_KEYS_EXTRA)))


def _norm(key: str) -> str:
    return key.lower().replace("-", "_")


def redact(value: Any, *, sensitive: bool = False) -> Any:
    """``value`` (decoded JSON) with secret keys' values, secret pairs and URL passwords masked;
    ``[redacted]`` whole when ``sensitive`` (``None`` stays ``None``)."""
    if sensitive and value is not None:
        return REDACTED
    return _walk(value, redact_keys())


def _walk(value: Any, keys: tuple[str, ...]) -> Any:
    if isinstance(value, dict):
        paired = any(k in _PAIR_NAMES and isinstance(v, str) and _secret(v, keys) for k, v in value.items())
        return {k: (REDACTED if (isinstance(k, str) and _secret(k, keys, v)) or (paired and k == "value")
                    else _walk(v, keys)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        if len(value) == 2 and isinstance(value[0], str) and _secret(value[0], keys):
            return [value[0], REDACTED]
        return [_walk(v, keys) for v in value]
    if isinstance(value, str):
        return _mask_text(value, keys, _URL_PASSWORD)
    return value


def _secret(key: str, keys: tuple[str, ...], value: Any = None) -> bool:
    """Whether ``key`` holds a secret: it contains a fragment of ``keys``. One exception: a number
    under the fragment's plural (``{"sessions": 3}``, ``{"tokens": 1200}``) is a count, not a secret."""
    normalized = _norm(key)
    count = isinstance(value, int | float) and not isinstance(value, bool)
    for fragment in keys:
        start = normalized.find(fragment)
        while start >= 0:
            end = start + len(fragment)
            if not (count and normalized[end:end + 1] == "s" and normalized[end + 1:end + 2] in ("", "_")):
                return True
            start = normalized.find(fragment, start + 1)
    return False


@functools.lru_cache(maxsize=8)
def _text_pattern(keys: tuple[str, ...]) -> re.Pattern[str]:
    # A key fragment matches with "-" or "_" (or nothing) where the setting has "_".
    key = r"[\w-]*(?:" + "|".join(re.escape(k).replace("_", "[-_]?") for k in keys) + r")[\w-]*"
    return re.compile(
        # {"name": "Authorization", "value": ...}
        r"""(?P<q1>["'])(?:name|key|header|field)(?P=q1)\s*:\s*(?P<q2>["'])""" + key
        + r"""(?P=q2)\s*,\s*(?P<q3>["'])value(?P=q3)\s*:\s*"""
        # key=value, key: value, "key": value
        r"""|["']?""" + key + r"""["']?\s*[:=]\s*"""
        # ("Authorization", "Bearer ...") and ["Authorization", "Bearer ..."]
        r"""|(?P<q4>["'])""" + key + r"""(?P=q4)\s*,\s*(?=[bru]{0,2}["'])""",
        re.IGNORECASE,
    )


def _quoted_end(text: str, start: int) -> int:
    quote, i = text[start], start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == quote:
            return i + 1
        else:
            i += 1
    return len(text)


def _bracketed_end(text: str, start: int) -> int:
    closing = {"{": "}", "[": "]", "(": ")"}
    stack, i = [closing[text[start]]], start + 1
    while i < len(text) and stack:
        char = text[i]
        if char in "\"'":
            i = _quoted_end(text, i)
            continue
        if char in closing:
            stack.append(closing[char])
        elif char == stack[-1]:
            stack.pop()
        i += 1
    return i


def _value_span(text: str, start: int) -> tuple[int, str]:
    """Where the value starting at ``start`` ends, and the quote its mask keeps ("" for none)."""
    if text.startswith(REDACTED, start):
        return start + len(REDACTED), ""
    prefix = start
    while prefix < len(text) and prefix - start < 2 and text[prefix] in "bBrRuU":
        prefix += 1
    if prefix < len(text) and text[prefix] in "\"'":
        return _quoted_end(text, prefix), text[prefix]
    if start < len(text) and text[start] in "{[(":
        return _bracketed_end(text, start), ""
    match = _BARE_VALUE.match(text, start)
    return (match.end() if match else start), ""


def _mask_text(text: str, keys: tuple[str, ...], url: re.Pattern[str]) -> str:
    text = url.sub(lambda m: m.group("pre") + REDACTED, text)
    if not keys:
        return text
    pattern = _text_pattern(keys)
    out: list[str] = []
    pos = 0
    while True:
        match = pattern.search(text, pos)
        if match is None:
            break
        end, quote = _value_span(text, match.end())
        # Nothing after the separator is nothing to mask; the key itself is never empty, so
        # the search always moves on.
        out.append(text[pos:end] if end == match.end() else text[pos:match.end()] + quote + REDACTED + quote)
        pos = end
    out.append(text[pos:])
    return "".join(out)


def redact_text(text: str | None, *, sensitive: bool = False) -> str | None:
    """Mask secret pairs and URL passwords inside free text (errors, logs); ``[redacted]`` whole
    when ``sensitive``."""
    if text is None:
        return None
    if sensitive:
        return REDACTED
    return _mask_text(text, redact_keys(), _URL_PASSWORD)


def preview_json(text: str | None, *, limit: int = 120, sensitive: bool = False) -> str:
    """A short, redacted preview of a JSON document given as (a prefix of) its text.

    Secret keys' values are replaced whole — a string, a number or a nested container — even
    when the text stops in the middle of one; the result is cut to ``limit`` characters.
    """
    if text is None:
        return ""
    if sensitive:
        return REDACTED
    keys = redact_keys()
    masked = _mask_text(_mask_json(text, keys), keys, _URL_PASSWORD_CUT)
    return masked if len(masked) <= limit else masked[: limit - 1] + "\u2026"


def _value_end(text: str, start: int) -> int:
    if text[start] not in "{[":
        i = start
        while i < len(text) and text[i] not in ",}]" + _SPACE:
            i += 1
        return i
    return _bracketed_end(text, start)


def _mask_json(text: str, keys: tuple[str, ...]) -> str:
    out: list[str] = []
    stack: list[str] = []
    want_key = mask_next = False
    i = 0
    while i < len(text):
        char = text[i]
        if mask_next and char not in _SPACE + ":":
            i = _quoted_end(text, i) if char == '"' else _value_end(text, i)
            out.append('"' + REDACTED + '"')
            mask_next = False
            continue
        if char == '"':
            end = _quoted_end(text, i)
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
