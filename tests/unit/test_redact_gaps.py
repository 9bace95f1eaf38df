"""The redactor's gaps from issue 13 (#9): each case plants a secret and asserts it is gone, and
that the text around it survives."""

from __future__ import annotations

import json

import pytest
from django.core import checks
from django.test import override_settings

from ultimate_jobs.redact import REDACTED, preview_json, redact, redact_text

SECRET = "Hunter2-S3cr3t"


@pytest.mark.parametrize("key", ["X-Api-Key", "x_api_key", "API-KEY", "pwd", "db_pwd", "private_key",
                                 "Private-Key", "SESSION_ID", "sentry_dsn", "Proxy-Authorization", "Set-Cookie"])
def test_every_default_key_spelling_is_masked_in_data_and_text(key: str) -> None:
    assert redact({"outer": {key: SECRET, "kept": "visible"}}) == {"outer": {key: REDACTED, "kept": "visible"}}
    for text in (f"{key}={SECRET}", f"{key}: {SECRET}", f'{{"{key}": "{SECRET}"}}', f"{{'{key}': '{SECRET}'}}"):
        shown = redact_text(text) or ""
        assert SECRET not in shown and key in shown, text


@pytest.mark.parametrize("url", [f"postgres://app:{SECRET}@db.internal:5432/shop",
                                 f"redis://:{SECRET}@cache:6379/0", f"amqp://guest:{SECRET}@mq/vhost"])
def test_a_password_inside_a_url_is_masked_in_any_string(url: str) -> None:
    masked = url.replace(SECRET, REDACTED)
    assert redact({"target": url, "nested": [{"plain": f"connect {url} failed"}]}) == {
        "target": masked, "nested": [{"plain": f"connect {masked} failed"}]}
    assert redact_text(f"OperationalError: could not connect to {url}") == \
        f"OperationalError: could not connect to {masked}"
    assert SECRET not in preview_json(json.dumps({"target": url}), limit=10_000)


def test_urls_without_a_password_are_left_alone() -> None:
    for text in ("see https://example.com:8443/path?a=1", "mailto:ann@example.com", "http://host:80/x@y"):
        assert redact_text(text) == text


def test_name_value_pairs_are_masked() -> None:
    headers = [["Authorization", f"Bearer {SECRET}"], ["Accept", "text/plain"]]
    assert redact({"headers": headers}) == {"headers": [["Authorization", REDACTED], ["Accept", "text/plain"]]}
    assert redact([("X-Api-Key", SECRET)]) == [["X-Api-Key", REDACTED]]
    fields = [{"name": "Authorization", "value": SECRET}, {"name": "Accept", "value": "text/plain"}]
    assert redact({"fields": fields}) == {"fields": [{"name": "Authorization", "value": REDACTED},
                                                     {"name": "Accept", "value": "text/plain"}]}
    for text in (json.dumps(headers), repr([tuple(h) for h in headers]), json.dumps(fields), repr(fields)):
        shown = redact_text(text) or ""
        assert SECRET not in shown and "text/plain" in shown, shown
        assert SECRET not in preview_json(json.dumps({"h": headers, "f": fields}), limit=10_000)


@pytest.mark.parametrize(("text", "kept"), [
    ("password = my secret phrase", "password = "),
    ("password=my secret phrase\nnext line", "\nnext line"),
    ("login failed: password: my secret phrase, user=ann", ", user=ann"),
    ("token=abc user=ann", " user=ann"),
    ("Authorization: Bearer my secret phrase", "Authorization: "),
    ("credential={'inner': 'my secret phrase'} after", " after"),
    ("api_key=b'my secret phrase' after", " after"),
])
def test_a_masked_value_in_text_is_masked_whole(text: str, kept: str) -> None:
    shown = redact_text(text) or ""
    assert "my secret phrase" not in shown and "secret phrase" not in shown and "abc" not in shown
    assert kept in shown and REDACTED in shown


@pytest.mark.parametrize("text", [
    f"password={SECRET} user=ann", f"password = my {SECRET}", f'{{"api_key": "{SECRET}", "n": 1}}',
    f"Authorization: Bearer {SECRET}", f"postgres://u:{SECRET}@h/db", f'[["Authorization", "{SECRET}"]]',
    f'{{"name": "Authorization", "value": "{SECRET}"}}', f"credential={{'a': '{SECRET}'}}",
])
def test_redaction_is_idempotent(text: str) -> None:
    once = redact_text(text)
    assert SECRET not in (once or "")
    assert redact_text(once) == once
    data = {"password": SECRET, "h": [["Authorization", SECRET]], "u": f"postgres://u:{SECRET}@h"}
    assert redact(redact(data)) == redact(data)
    preview = preview_json(json.dumps(data), limit=10_000)
    assert preview_json(preview, limit=10_000) == preview


def test_redact_keys_extra_adds_to_the_defaults() -> None:
    with override_settings(ULTIMATE_JOBS={"REDACT_KEYS_EXTRA": ["Card-Number"]}):
        assert redact({"card_number": SECRET, "password": SECRET, "n": 1}) == {
            "card_number": REDACTED, "password": REDACTED, "n": 1}
        assert SECRET not in (redact_text(f"card-number={SECRET}") or "")


def test_replacing_the_defaults_is_a_check_warning() -> None:
    from ultimate_jobs.checks import check_settings

    with override_settings(ULTIMATE_JOBS={"REDACT_KEYS": []}):
        messages = check_settings()
    assert [(m.id, m.level) for m in messages] == [("ultimate_jobs.W001", checks.WARNING)]
    assert "password" in messages[0].msg and "REDACT_KEYS_EXTRA" in (messages[0].hint or "")
    with override_settings(ULTIMATE_JOBS={"REDACT_KEYS": ["password", "ssn"]}):
        messages = check_settings()
    assert [m.id for m in messages] == ["ultimate_jobs.W001"] and "token" in messages[0].msg
    with override_settings(ULTIMATE_JOBS={"REDACT_KEYS_EXTRA": ["ssn"]}):
        assert check_settings() == []


def test_sensitive_text_is_redacted_whole() -> None:
    assert redact_text("ValueError: card 4111", sensitive=True) == REDACTED
    assert redact_text(None, sensitive=True) is None


def test_a_count_under_a_plural_key_is_not_a_secret() -> None:
    assert redact({"sessions": 3, "tokens": 1200, "token": 12345, "sessions_kept": 2.5}) == {
        "sessions": 3, "tokens": 1200, "token": REDACTED, "sessions_kept": 2.5}
    assert redact({"sessions": ["abc"], "secrets": "s3", "session": 7, "cookies": True}) == {
        "sessions": REDACTED, "secrets": REDACTED, "session": REDACTED, "cookies": REDACTED}
