"""The redactor's text forms: free text and JSON cut short (the admin's payload preview)."""

from __future__ import annotations

import json
import logging

import pytest

from ultimate_jobs.redact import RedactingFilter, preview_json, redact_text

SECRET = "hunter2-s3cr3t"
PAYLOAD = {"user": "ann", "password": SECRET, "items": [{"api_key": SECRET, "n": 1}],
           "headers": {"Authorization": f"Bearer {SECRET}"}, "token": 12345, "creds": {"a": [1, {"b": "plain"}]},
           "credential": {"x": SECRET}}


@pytest.mark.parametrize("cut", range(1, len(json.dumps(PAYLOAD)) + 1))
def test_a_json_prefix_never_shows_a_secret_wherever_it_is_cut(cut: int) -> None:
    text = json.dumps(PAYLOAD)[:cut]
    shown = preview_json(text, limit=10_000)
    for n in range(4, len(SECRET) + 1):
        assert SECRET[:n] not in shown, (cut, shown)
    assert "12345" not in shown


def test_a_preview_keeps_what_is_not_secret_and_is_cut_to_the_limit() -> None:
    shown = preview_json(json.dumps(PAYLOAD), limit=40)
    assert shown.startswith('{"user": "ann", "password": "[reda')
    assert '"creds": {"a": [1, {"b": "plain"}]}' in preview_json(json.dumps(PAYLOAD), limit=10_000)
    assert len(shown) == 40 and shown.endswith("\u2026")
    assert preview_json(json.dumps(PAYLOAD), sensitive=True) == "[redacted]"


@pytest.mark.parametrize("text", [
    f"login failed password={SECRET}",
    f"headers={{'Authorization': 'Bearer {SECRET}'}}",
    f"Authorization: Bearer {SECRET}",
    f'{{"items": [{{"api_key": "{SECRET}"}}]}}',
])
def test_free_text_is_masked(text: str) -> None:
    assert SECRET not in (redact_text(text) or "")


def test_the_log_filter_masks_messages_and_tracebacks() -> None:
    record = logging.LogRecord("ultimate_jobs", logging.ERROR, __file__, 1, "jobs.x %s", (f"password={SECRET}",),
                               None)
    try:
        raise ValueError(f"api_key={SECRET}")
    except ValueError:
        import sys

        record.exc_info = sys.exc_info()
    RedactingFilter().filter(record)
    assert SECRET not in record.getMessage() and SECRET not in (record.exc_text or "")
