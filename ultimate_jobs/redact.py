"""Internal: the one redactor every surface (ops, admin, CLI, logs) passes values through.

A ``sensitive=True`` job shows ``[redacted]`` for its payload, result and step outputs; any
mapping key containing one of ``REDACT_KEYS`` (case-insensitive: ``password``, ``api_key``,
``Authorization`` ...) has its value masked at any depth.
"""

from __future__ import annotations

import re
from typing import Any

from .conf import get_settings

REDACTED = "[redacted]"


def redact(value: Any, *, sensitive: bool = False) -> Any:
    if sensitive and value is not None:
        return REDACTED
    keys = get_settings().REDACT_KEYS
    return _walk(value, keys)


def _walk(value: Any, keys: tuple[str, ...]) -> Any:
    if isinstance(value, dict):
        return {k: (REDACTED if isinstance(k, str) and _secret(k, keys) else _walk(v, keys)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_walk(v, keys) for v in value]
    return value


def _secret(key: str, keys: tuple[str, ...]) -> bool:
    lowered = key.lower()
    return any(k in lowered for k in keys)


def redact_text(text: str | None, *, sensitive: bool = False) -> str | None:
    """Mask ``key=value`` / ``"key": "value"`` pairs whose key is secret inside free text (errors, logs)."""
    if text is None:
        return None
    keys = get_settings().REDACT_KEYS
    if not keys:
        return text
    pattern = re.compile(
        r"""(?P<key>["']?[\w-]*(?:%s)[\w-]*["']?\s*[:=]\s*)(?P<value>"[^"]*"|'[^']*'|(?:Bearer\s+|Basic\s+)?[^\s,;}'")\]]+)"""
        % "|".join(re.escape(k) for k in keys),
        re.IGNORECASE,
    )
    return pattern.sub(lambda m: m.group("key") + REDACTED, text)
