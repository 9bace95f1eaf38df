"""Redaction runs in linear time (SPEC §10, issue 25: one 20,000-character word took 55 s and held
the GIL). Each surface's redactor gets a 1 MiB one-word string of the shapes that were quadratic
(hex, base64url, a JWT) and dense adversarial texts, under a bound far from the old figure (1 MiB
would have taken hours); the secrets planted inside the big strings are still masked."""

from __future__ import annotations

import base64
import json
import logging
import random
import time
from collections.abc import Callable

import pytest

from ultimate_jobs.redact import REDACTED, RedactingFilter, preview_json, redact, redact_text
from ultimate_jobs.runtime.failures import format_error

MIB = 1 << 20
BOUND = 5.0  # seconds; before the fix a 10 KiB word already took 4-30 s and 1 MiB hours
PLANTED = ("Planted-Pw-51e7", "Planted-Tok-9c2a", "Planted-Flag-77d0", "Planted-Url-0b3f")


def _word(shape: str, n: int = MIB) -> str:
    raw = random.Random(25).randbytes(n)
    if shape == "hex":
        return raw.hex()[:n]
    b64 = base64.urlsafe_b64encode(raw).decode()[:n]
    if shape == "base64url":
        return b64
    third = n // 3
    return "eyJ" + b64[3:third] + "." + b64[third + 1:2 * third] + "." + b64[2 * third + 1:]


def _raised(text: str) -> BaseException:
    try:
        raise ValueError(text)
    except ValueError as exc:
        return exc


def _logged(text: str) -> str:
    record = logging.LogRecord("ultimate_jobs", logging.ERROR, __file__, 1, "jobs.x %s", (text,), None)
    RedactingFilter().filter(record)
    return record.getMessage()


SURFACES: dict[str, Callable[[str], str]] = {
    "redact_text": lambda t: redact_text(t) or "",
    "format_error": lambda t: format_error(_raised(t)),
    "redact": lambda t: json.dumps(redact({"blob": t, "nested": [t]})),
    "preview_json": lambda t: preview_json(json.dumps({"blob": t}), limit=10 * MIB),
    "log": _logged,
}


def _timed(fn: Callable[[str], str], text: str) -> tuple[str, float]:
    start = time.perf_counter()
    shown = fn(text)
    return shown, time.perf_counter() - start


@pytest.mark.parametrize("surface", SURFACES)
@pytest.mark.parametrize("shape", ["hex", "base64url", "jwt"])
def test_a_one_mib_word_is_redacted_in_linear_time_on_every_surface(shape: str, surface: str) -> None:
    word = _word(shape)
    shown, took = _timed(SURFACES[surface], word)
    assert took < BOUND, f"{shape} on {surface}: {took:.1f} s"
    # nothing secret in it: kept whole (the stored error keeps the traceback's head and the message's end)
    assert word[-3000:] in shown if surface == "format_error" else word in shown


@pytest.mark.parametrize("surface", SURFACES)
@pytest.mark.parametrize("shape", ["hex", "base64url", "jwt"])
def test_secrets_planted_around_and_between_big_words_are_still_masked(shape: str, surface: str) -> None:
    pw, tok, flag, url = PLANTED
    half = _word(shape, MIB // 2)
    text = (f"password={pw} {half} Authorization: Bearer {tok} {half}token={tok}\n"
            f"run --password {flag} https://{url}@git.example.com/x {half}")
    shown, took = _timed(SURFACES[surface], text)
    assert took < BOUND, f"{shape} on {surface}: {took:.1f} s"
    for secret in PLANTED:
        assert secret not in shown, (secret, surface)
    assert REDACTED in shown


@pytest.mark.parametrize("unit", [
    "token=a ", '"name": "token", ', "('token', 'x') ", "'token'", "token ", "--token ", "a://b@", "a://b:",
    "tokenTOKEN-", '"', "x:", "password = my secret, ", "\\", "(", "[{",
])
def test_dense_adversarial_text_is_linear_too(unit: str) -> None:
    text = (unit * (MIB // len(unit) + 1))[:MIB // 2] + f" secret={PLANTED[0]}"
    for surface in ("redact_text", "preview_json", "redact"):
        shown, took = _timed(SURFACES[surface], text)
        assert took < BOUND, f"{unit!r} on {surface}: {took:.1f} s"


@pytest.mark.parametrize("text", ["password=" + " " * MIB + "x", "token=\t" + "\t" * MIB, 'api_key="' + "\\" * MIB,
                                  "secret=" + "[" * MIB, "a://" + "b" * MIB, "token" * (MIB // 5)])
def test_long_runs_after_a_key_are_linear(text: str) -> None:
    shown, took = _timed(SURFACES["redact_text"], text)
    assert took < BOUND, f"{text[:12]!r}: {took:.1f} s"
