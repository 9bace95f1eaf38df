"""Internal: the one JSON encoding for payloads, results and step outputs, and the plain values
(``iso``, ``plain``) the operator surfaces answer.

JSON only (never pickle): ``UUID``, ``datetime``, ``date``, ``time``, ``timedelta`` and
``Decimal`` become strings through Django's ``DjangoJSONEncoder``. Refused: NaN and infinity,
strings holding NUL (PostgreSQL's jsonb cannot store it) or a lone surrogate (not UTF-8),
a mapping key that is not a string at any depth (``json`` would coerce it silently, so
``{1: "a", "1": "b"}`` would collapse into one key), nesting deeper than the encoder can
follow, and anything over the caller's byte limit (``TooLarge``).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, overload
from uuid import UUID

from django.core.serializers.json import DjangoJSONEncoder

_ENCODER = DjangoJSONEncoder(allow_nan=False, ensure_ascii=False, separators=(",", ":"))


class NotJSON(ValueError):
    """A value that cannot be stored as JSON; the message says why."""


class TooLarge(NotJSON):
    """A value whose encoding is over the caller's byte limit."""


def dumps(value: Any, *, max_bytes: int | None = None, what: str = "value") -> str:
    """Encode ``value``; raise ``NotJSON`` with a readable reason."""
    try:
        text = _ENCODER.encode(value)
    except RecursionError:
        raise NotJSON(f"{what} is nested too deeply to encode as JSON") from None
    except (TypeError, ValueError) as exc:
        raise NotJSON(f"{what} is not JSON-encodable: {exc}") from None
    bad_key = _non_string_key(value)
    if bad_key is not None:
        raise NotJSON(f"{what} has the key {bad_key[0]!r} ({type(bad_key[0]).__name__}); JSON keys are strings, "
                      "and a coerced key can collide with another (use str keys)")
    if "\\u0000" in text and _holds_nul(value):
        raise NotJSON(f"{what} holds a NUL character, which PostgreSQL's jsonb cannot store")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise NotJSON(f"{what} holds a lone surrogate, which is not valid UTF-8") from None
    if max_bytes is not None and size > max_bytes:
        raise TooLarge(f"{what} is {size} bytes encoded, over the {max_bytes}-byte limit")
    return text


def loads(text: str | bytes | None) -> Any:
    if text is None:
        return None
    if isinstance(text, dict | list):  # a driver that already decoded jsonb
        return text
    return json.loads(text)


def _non_string_key(value: Any) -> tuple[object] | None:
    """The first mapping key that is not a ``str``, at any depth, in a 1-tuple; ``None`` when every key is."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    return (key,)
                if isinstance(child, dict | list | tuple):  # scalars are never pushed: most inputs are flat
                    stack.append(child)
        elif isinstance(item, list | tuple):
            stack.extend(child for child in item if isinstance(child, dict | list | tuple))
    return None


def _holds_nul(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


def contains(doc: Any, sub: Any) -> bool:
    """PostgreSQL's jsonb ``doc @> sub``, for stores without it: an object contains an object
    whose every key it has with a contained value; an array contains an array whose every element
    some element of it contains (order and duplicates ignored); scalars must be equal, and a
    boolean is never equal to a number (``true`` is not ``1``)."""
    if isinstance(sub, dict):
        return isinstance(doc, dict) and all(k in doc and contains(doc[k], v) for k, v in sub.items())
    if isinstance(sub, list):
        if not isinstance(doc, list):
            return False
        return all(any(contains(d, s) for d in doc) for s in sub)
    if isinstance(doc, dict | list):
        return False
    if isinstance(doc, bool) or isinstance(sub, bool):
        return isinstance(doc, bool) and isinstance(sub, bool) and doc == sub
    return bool(doc == sub) and (doc is None) == (sub is None)


@overload
def iso(value: datetime) -> str: ...


@overload
def iso(value: None) -> None: ...


def iso(value: datetime | None) -> str | None:
    """An aware datetime as ISO 8601 in UTC with a ``Z``; ``None`` stays ``None``."""
    return None if value is None else value.isoformat().replace("+00:00", "Z")


def plain(value: Any) -> Any:
    """UUIDs and datetimes as strings, so ``json.dumps`` takes the answer as it is."""
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, datetime):
        return iso(value)
    return value
