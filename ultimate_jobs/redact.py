"""Internal: the one redactor every surface (ops, admin, CLI, logs, stored errors, spans) passes values through.

A ``sensitive=True`` job shows ``[redacted]`` for its payload, result, step outputs and error
text. Otherwise a secret key's value is masked at any depth: a key is secret when it contains
one of ``REDACT_KEYS`` plus ``REDACT_KEYS_EXTRA``, compared case-insensitively with ``-`` and
``_`` alike (``X-Api-Key`` matches ``api_key``), camelCase too (``privateKey``, ``apiKey``).
Name/value pairs count as keys too (``[["Authorization", "Bearer ..."]]``, ``{"name":
"Authorization", "value": "..."}``), and a URL's password (``postgres://u:PASS@h``) or a token
alone in its userinfo (``https://TOKEN@host``) is masked in any string.

Free text (errors, log lines, span events) gets the same rules as text: ``key=value``,
``key: value``, ``"key": "value"`` and quoted pairs; a quoted or bracketed value is masked
whole, and an unquoted one up to the end of its line, a delimiter (``, ; & ) ] }``) or the next
``word=`` pair, so ``password = my secret`` hides ``my secret``, not just ``my``; a command
line's flag (``--password X``, ``--token=X``) hides its one word or quoted string. A JSON text
cut short (the admin's payload preview reads only a prefix) is masked token by token, so a
secret cut in half is still masked. Redaction is idempotent: redacting text that was already
redacted changes nothing (stored errors are redacted before they are written, and surfaces
redact again when they show them). ``RedactingFilter`` applies the text rule to every record of
the ``ultimate_jobs`` logger (installed by the app config).

Everything here runs in linear time (SPEC §10): a text is searched for key fragments in one pass
(``_hits``), and the key patterns are tried only at the few places a key about a found word can
start, with possessive quantifiers, so no run of characters is walked again from each of its
positions (issue 25: a 20,000-character word took 55 s and held the GIL).
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Iterator
from typing import Any

from ultimate_jobs.conf import get_settings

REDACTED = "[redacted]"
_SPACE = " \t\r\n"
_PAIR_NAMES = frozenset({"name", "key", "header", "field"})
# Every pattern below runs in linear time (SPEC §10): no quantified part can be tried again from
# each position of a long run. The scheme is found from its "://" (a literal the engine jumps to);
# the rest of the URL is bounded by characters the parts cannot hold.
_SCHEME = r"://(?<=[a-z0-9+.-]://)"
_URL = r"(?P<pre>" + _SCHEME + r"""[^\s:/@'"]*+:)(?P<pw>[^\s@/?#'"]++)"""
_URL_PASSWORD = re.compile(_URL + r"(?=@)", re.IGNORECASE)
# In a preview cut short, a URL's password may run to the end of the text (its "@" was cut off).
_URL_PASSWORD_CUT = re.compile(_URL + r"(?=@|$)", re.IGNORECASE)
# A token alone in a URL's userinfo (``https://TOKEN@host``): the whole userinfo is masked.
_URL_TOKEN = re.compile(r"(?P<pre>" + _SCHEME + r""")(?P<pw>[^\s:/@'"?#]++)(?=@)""", re.IGNORECASE)
# A bare value's pieces (``_bare_end``): a run of value characters, the blanks after it on the
# same line, and the ``word=`` pair that ends the value when it follows them.
_BARE_DELIMS = "\n,;&}])'\""
_BARE_RUN = re.compile(r"""[^\s,;&}\])'"]*+""")
_INLINE_BLANKS = re.compile(r"[^\S\n]*+")
_NEXT_PAIR = re.compile(r"[\w.-]++\s*+[:=]")
_QUOTED_BODY = {q: re.compile(r"(?:[^" + q + r"\\]++|\\.)*+", re.DOTALL) for q in "\"'"}
_BRACKET_STOP = re.compile(r"""[{}\[\]()"']""")
_JSON_PLAIN = re.compile(r'[^"{}\[\],]++')
_JSON_GAP = re.compile(r"[ \t\r\n:]*+")
_JSON_SCALAR = re.compile(r"[^,}\] \t\r\n]*+")
_FLAG_VALUE = re.compile(r"\S*+")
# The first character of the word holding a fragment (searched up to the fragment), and its rest.
_WORD_START = re.compile(r"(?<![\w-])[\w-]*+\Z")
_WORD_REST = re.compile(r"[\w-]*+")
# A camelCase boundary in a key name (``privateKey``, ``apiKey``, ``tokensUsed``).
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


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
    """Whether ``key`` holds a secret: it contains a fragment of ``keys``, in snake, kebab or
    camelCase (``privateKey``, ``apiKey`` and ``APIKEY`` match ``private_key`` and ``api_key``).
    One exception: a number under the fragment's plural (``{"sessions": 3}``, ``{"tokensUsed":
    1200}``) is a count, not a secret."""
    if not keys:
        return False
    fragments = _fragments(keys)
    spelled = _norm(_CAMEL.sub("_", key))
    if isinstance(value, int | float) and not isinstance(value, bool):
        match = fragments.search(spelled)
        while match is not None:
            end = match.end()
            if not (spelled[end:end + 1] == "s" and spelled[end + 1:end + 2] in ("", "_")):
                return True
            match = fragments.search(spelled, match.start() + 1)
        return False
    return fragments.search(spelled) is not None or fragments.search(key.lower().replace("-", "_")) is not None


@functools.lru_cache(maxsize=8)
def _fragments(keys: tuple[str, ...]) -> re.Pattern[str]:
    """Any fragment inside a normalized key name; ``_`` in a fragment may be absent (``apikey``)."""
    return re.compile("|".join(re.escape(k).replace("_", "_?") if k.strip("_") else re.escape(k) for k in keys))


# Characters ``re.IGNORECASE`` also folds onto a fragment's letter (``_hits`` spells cases out).
_FOLDS = {"s": "\u017f", "k": "\u212a", "i": "\u0131"}


@functools.lru_cache(maxsize=8)
def _hits(keys: tuple[str, ...]) -> re.Pattern[str]:
    """Any fragment, in any case, with "-" or "_" (or nothing) where the setting has "_": one fast
    pass over the text (the cases are spelled out and a fragment's first letter is looked for
    first, which is several times faster than ``re.IGNORECASE`` on a long text)."""
    def letter(char: str) -> str:
        if char == "_":
            return "[-_]?"
        return "[" + re.escape("".join(sorted({char, char.upper(), char.lower(), *_FOLDS.get(char, "")}))) + "]"
    # A fragment's leading "_" may be absent: look for what follows it (a hit need only be a superset).
    keys = tuple(k.lstrip("_") for k in keys if k.strip("_"))
    if not keys:
        return re.compile(r"(?!)")  # fragments of underscores only: nothing to find
    spelled = "|".join("".join(letter(c) for c in k) for k in keys)
    first = "".join(sorted({c for k in keys for c in (k[0], k[0].upper(), *_FOLDS.get(k[0], ""))}))
    return re.compile("(?=[" + re.escape(first) + "])(?:" + spelled + ")")


# Where a key's separator follows the word holding a fragment (the word is ``[\w-]++``: the
# fragment was found by ``_hits``). Each is tried only at a few places (``_key_match``).
_PAIR_KEY = re.compile(  # {"name": "Authorization", "value": ...}
    r"""(?P<q1>["'])(?i:name|key|header|field)(?P=q1)\s*+:\s*+(?P<q2>["'])(?P<key>[\w-]++)(?P=q2)\s*+,\s*+"""
    r"""(?P<q3>["'])(?i:value)(?P=q3)\s*+:\s*+""")
_KEY = re.compile(
    # key=value, key: value, "key": value (and --key=value, a flag: its value is one word)
    r"""["']?(?P<dash>--)?[\w-]++["']?\s*+[:=]\s*+"""
    # ("Authorization", "Bearer ...") and ["Authorization", "Bearer ..."]
    r"""|(?P<q4>["'])[\w-]++(?P=q4)\s*+,\s*+(?=[bruBRU]{0,2}["'])"""
    # --password VALUE (a command line's flag and its separate value)
    r"""|(?P<flag>--)[\w-]++[ \t]++(?=[^\s-])""")


def _quoted_end(text: str, start: int) -> int:
    """The end of the string quoted at ``start`` (its closing quote included; the text's end when
    it is never closed). A backslash escapes the next character."""
    quote = text[start]
    end = _QUOTED_BODY[quote].match(text, start + 1).end()  # type: ignore[union-attr]  # "*" always matches
    return end + 1 if end < len(text) and text[end] == quote else len(text)


def _bracketed_end(text: str, start: int) -> int:
    closing = {"{": "}", "[": "]", "(": ")"}
    stack, i = [closing[text[start]]], start + 1
    while stack:
        stop = _BRACKET_STOP.search(text, i)
        if stop is None:
            return len(text)
        i = stop.start()
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


def _bare_end(text: str, start: int) -> int:
    """The end of an unquoted value: before the next ``word=`` pair, a delimiter (``, ; & ) ] }``,
    a quote), a line end or the text's end, blanks before them left out. One pass: each piece of
    the text is looked at a bounded number of times."""
    i = start
    while True:
        i = _BARE_RUN.match(text, i).end()  # type: ignore[union-attr]  # "*" always matches
        if i >= len(text) or text[i] in _BARE_DELIMS:
            return i
        after = _INLINE_BLANKS.match(text, i).end()  # type: ignore[union-attr]
        if after >= len(text) or text[after] in _BARE_DELIMS or _NEXT_PAIR.match(text, after):
            return i
        i = after


def _value_span(text: str, start: int, *, flag: bool = False) -> tuple[int, str]:
    """Where the value starting at ``start`` ends, and the quote its mask keeps ("" for none). A
    flag's value (``--token VALUE``) is one word or one quoted string."""
    if text.startswith(REDACTED, start):
        return start + len(REDACTED), ""
    prefix = start
    while prefix < len(text) and prefix - start < 2 and text[prefix] in "bBrRuU":
        prefix += 1
    if prefix < len(text) and text[prefix] in "\"'":
        return _quoted_end(text, prefix), text[prefix]
    if flag:
        return _FLAG_VALUE.match(text, start).end(), ""  # type: ignore[union-attr]
    if start < len(text) and text[start] in "{[(":
        return _bracketed_end(text, start), ""
    return _bare_end(text, start), ""


def _mask_urls(text: str, url: re.Pattern[str]) -> str:
    text = url.sub(lambda m: m.group("pre") + REDACTED, text)
    return _URL_TOKEN.sub(lambda m: m.group("pre") + REDACTED, text)


def _mask_text(text: str, keys: tuple[str, ...], url: re.Pattern[str]) -> str:
    if "://" in text:
        text = _mask_urls(text, url)
    if not keys:
        return text
    out: list[str] = []
    done = [0]  # the end of the last value masked: the next key is looked for after it
    for match in _key_matches(text, keys, done):
        flag = match.re is _KEY and bool(match.group("flag") or match.group("dash"))
        end, quote = _value_span(text, match.end(), flag=flag)
        # Nothing after the separator is nothing to mask.
        pos = done[0]
        out.append(text[pos:end] if end == match.end() else text[pos:match.end()] + quote + REDACTED + quote)
        done[0] = end
    out.append(text[done[0]:])
    return "".join(out)


def _key_matches(text: str, keys: tuple[str, ...], done: list[int]) -> Iterator[re.Match[str]]:
    """Each secret key with its separator, left to right, none before ``done[0]`` (the end of the
    last value masked), found in linear time: from each fragment the fast ``_hits`` search finds,
    the word holding it, and the key patterns tried only where a match about that word can start
    (the quote of a ``"name": `` before it, the quote before it, its first character), never at
    every position of a long run."""
    hits = _hits(keys)
    scanned = 0  # every word before this was looked at
    while True:
        low = max(done[0], scanned)
        hit = hits.search(text, low)
        if hit is None:
            return
        # Past the word (and at least one character on, so the walk always moves forward).
        scanned = max(_WORD_REST.match(text, hit.end()).end(), low + 1)  # type: ignore[union-attr]
        word = _WORD_START.search(text, low, hit.start() + 1)
        if word is None:  # the word began inside the value masked last
            continue
        match = _key_match(text, low, word.start(), hits)
        if match is not None:
            yield match


def _key_match(text: str, low: int, start: int, hits: re.Pattern[str]) -> re.Match[str] | None:
    """The key match about the word at ``start`` (no earlier than ``low``), leftmost first."""
    if start - 1 >= low and text[start - 1] in "\"'":
        head = text[low:start - 1].rstrip()
        if head.endswith(":"):
            head = head[:-1].rstrip()
            tail = head[-8:].lower()
            for name in _PAIR_NAMES:
                at = len(tail) - len(name) - 2
                if at >= 0 and tail[at] == tail[-1] and tail[-1] in "\"'" and tail[at + 1:-1] == name:
                    pair = _PAIR_KEY.match(text, low + len(head) - len(name) - 2)
                    if pair is not None:
                        return pair
        pair = _PAIR_KEY.match(text, start - 1)  # the word is the pair's "name" (a fragment such as "key")
        if pair is not None and hits.search(pair.group("key")):
            return pair
        match = _KEY.match(text, start - 1)
        if match is not None:
            return match
    return _KEY.match(text, start)


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
        return _JSON_SCALAR.match(text, start).end()  # type: ignore[union-attr]  # "*" always matches
    return _bracketed_end(text, start)


def _mask_json(text: str, keys: tuple[str, ...]) -> str:
    out: list[str] = []
    stack: list[str] = []
    want_key = mask_next = False
    i = 0
    while i < len(text):
        if mask_next:
            gap = _JSON_GAP.match(text, i).end()  # type: ignore[union-attr]  # "*" always matches
            out.append(text[i:gap])
            i = gap
            if i < len(text):
                i = _quoted_end(text, i) if text[i] == '"' else _value_end(text, i)
                out.append('"' + REDACTED + '"')
            mask_next = False
            continue
        char = text[i]
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
        else:  # anything else is copied as it is, a run at a time
            plain = _JSON_PLAIN.match(text, i).end()  # type: ignore[union-attr]  # a "+" on a char it holds
            out.append(text[i:plain])
            i = plain
            continue
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
