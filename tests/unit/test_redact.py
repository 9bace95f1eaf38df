"""The redactor (``ultimate_jobs/redact.py``): data and free text masked exactly where they are secret
(every default key spelling, a password inside a URL, name/value pairs, a value up to its end) and
nothing around them, against whole outputs worked out by hand; the fragments the settings add or
replace; the JSON preview never showing a secret wherever it is cut; the log filter."""

from __future__ import annotations

import json
import logging
import sys

import pytest
from django.core import checks
from django.test import override_settings

from ultimate_jobs.redact import REDACTED, RedactingFilter, preview_json, redact, redact_keys, redact_text

R = REDACTED
SECRET = "Hunter2-S3cr3t"
PAYLOAD = {"user": "ann", "password": SECRET, "items": [{"api_key": SECRET, "n": 1}],
           "headers": {"Authorization": f"Bearer {SECRET}"}, "token": 12345, "creds": {"a": [1, {"b": "plain"}]},
           "credential": {"x": SECRET}}


# -- data: masked exactly where it is secret, and nothing around it --------------------------------


def test_the_default_fragments_in_force() -> None:
    assert redact_keys() == ("password", "passwd", "pwd", "secret", "token", "api_key", "apikey", "private_key",
                             "authorization", "cookie", "session", "signature", "credential", "dsn")


@pytest.mark.parametrize("key", ["X-Api-Key", "x_api_key", "API-KEY", "pwd", "db_pwd", "private_key",
                                 "Private-Key", "SESSION_ID", "sentry_dsn", "Proxy-Authorization", "Set-Cookie"])
def test_every_default_key_spelling_is_masked_in_data_and_text(key: str) -> None:
    assert redact({"outer": {key: SECRET, "kept": "visible"}}) == {"outer": {key: REDACTED, "kept": "visible"}}
    for text in (f"{key}={SECRET}", f"{key}: {SECRET}", f'{{"{key}": "{SECRET}"}}', f"{{'{key}': '{SECRET}'}}"):
        shown = redact_text(text) or ""
        assert SECRET not in shown and key in shown, text


@pytest.mark.parametrize(("data", "shown"), [
    ({"user": "ann", "password": "p1", "nested": {"API-Key": "k1", "n": 1}},
     {"user": "ann", "password": R, "nested": {"API-Key": R, "n": 1}}),
    # a number under a fragment's plural is a count; a bool, a string, a list, the singular are not
    ({"sessions": 3, "tokens": 1.5, "sessions_total": 4, "session": 3, "sessionsx": 5, "flags_sessions": True,
      "tokens_": "abc", "passwords": [1]},
     {"sessions": 3, "tokens": 1.5, "sessions_total": 4, "session": R, "sessionsx": R, "flags_sessions": R,
      "tokens_": R, "passwords": R}),
    ([["Authorization", "Bearer abc"], ["Accept", "json"], ("Cookie", "c=1"), ["a", "b", "c"]],
     [["Authorization", R], ["Accept", "json"], ["Cookie", R], ["a", "b", "c"]]),
    ({"name": "Authorization", "value": "Bearer abc"}, {"name": "Authorization", "value": R}),
    ({"header": "X-Api-Key", "value": 5, "other": "x"}, {"header": "X-Api-Key", "value": R, "other": "x"}),
    ({"name": "Accept", "value": "json"}, {"name": "Accept", "value": "json"}),
    ({"name": 5, "value": "v", "key": "plain"}, {"name": 5, "value": "v", "key": "plain"}),
    ({1: "a", "pwd": None, "dsn": {"x": 1}}, {1: "a", "pwd": R, "dsn": R}),
    ({"url": "postgres://u:PASS@h/db", "note": "see https://example.com/a:b"},
     {"url": f"postgres://u:{R}@h/db", "note": "see https://example.com/a:b"}),
    ([1, None, 2.5, True], [1, None, 2.5, True]),
    ("plain text", "plain text"),
])
def test_data_is_masked_exactly_where_it_is_secret(data: object, shown: object) -> None:
    assert redact(data) == shown


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


def test_a_count_under_a_plural_key_is_not_a_secret() -> None:
    assert redact({"sessions": 3, "tokens": 1200, "token": 12345, "sessions_kept": 2.5}) == {
        "sessions": 3, "tokens": 1200, "token": REDACTED, "sessions_kept": 2.5}
    assert redact({"sessions": ["abc"], "secrets": "s3", "session": 7, "cookies": True}) == {
        "sessions": REDACTED, "secrets": REDACTED, "session": REDACTED, "cookies": REDACTED}


def test_sensitive_data_is_hidden_whole_but_none_stays_none() -> None:
    assert redact({"a": 1}, sensitive=True) == R
    assert redact(0, sensitive=True) == R
    assert redact(None, sensitive=True) is None
    assert redact({"a": 1}, sensitive=False) == {"a": 1}


# -- free text: from the separator to the value's end ----------------------------------------------


@pytest.mark.parametrize("text", [
    f"login failed password={SECRET}",
    f"headers={{'Authorization': 'Bearer {SECRET}'}}",
    f"Authorization: Bearer {SECRET}",
    f'{{"items": [{{"api_key": "{SECRET}"}}]}}',
])
def test_free_text_is_masked(text: str) -> None:
    assert SECRET not in (redact_text(text) or "")


@pytest.mark.parametrize(("text", "shown"), [
    ("password = my secret, next=1", f"password = {R}, next=1"),
    ("password=abc;user=ann", f"password={R};user=ann"),
    ("password=abc&user=ann", f"password={R}&user=ann"),
    ("password=abc token=def", f"password={R} token={R}"),
    ("token: 'quoted value' rest", f"token: '{R}' rest"),
    ('api_key="a\\"b" tail', f'api_key="{R}" tail'),
    ("secret={'a': [1, 2]} after", f"secret={R} after"),
    ('secret={"k": "}"} e', f"secret={R} e"),
    ("secret=(a(b)c) d", f"secret={R} d"),
    ("secret=[1, [2]] d", f"secret={R} d"),
    ("x-api-key: K end\nline2", f"x-api-key: {R}\nline2"),
    ("pwd=b'bytes' z", f"pwd='{R}' z"),
    ("secret=u'x' ok", f"secret='{R}' ok"),
    ("Authorization: Bearer abc def & q=1", f"Authorization: {R} & q=1"),
    ("dsn postgres://u:pw@h end", f"dsn postgres://u:{R}@h end"),
    ('("Authorization", "Bearer x")', f'("Authorization", "{R}")'),
    ("['Cookie', b'c=1']", f"['Cookie', '{R}']"),
    ('{"name": "Authorization", "value": "Bearer y"}', f'{{"name": "Authorization", "value": "{R}"}}'),
    ("{'header': 'X-Api-Key', 'value': 'k'}", f"{{'header': 'X-Api-Key', 'value': '{R}'}}"),
    ("password=", "password="),
    ('password="" user=ann', f'password="{R}" user=ann'),
    ('password="x" user="y"', f'password="{R}" user="y"'),
    ("password=, user=ann", "password=, user=ann"),
    (f"password={R} and more", f"password={R} and more"),
    ("auth=(x, y) z", "auth=(x, y) z"),
    ("nothing here: at all", "nothing here: at all"),
    ('api_key="unterminated', f'api_key="{R}"'),
    ("secret=[open", f"secret={R}"),
])
def test_text_is_masked_exactly_from_the_separator_to_the_values_end(text: str, shown: str) -> None:
    assert redact_text(text) == shown
    assert redact_text(shown) == shown  # idempotent


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


def test_text_none_and_sensitive() -> None:
    assert redact_text(None) is None
    assert redact_text("password=1", sensitive=True) == R
    assert redact_text("plain", sensitive=False) == "plain"


def test_sensitive_text_is_redacted_whole() -> None:
    assert redact_text("ValueError: card 4111", sensitive=True) == REDACTED
    assert redact_text(None, sensitive=True) is None


# -- the fragments: REDACT_KEYS and REDACT_KEYS_EXTRA ----------------------------------------------


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


@override_settings(ULTIMATE_JOBS={"REDACT_KEYS": [], "REDACT_KEYS_EXTRA": []})
def test_with_no_fragments_only_url_passwords_are_masked() -> None:
    assert redact_keys() == ()
    assert redact_text("password=abc postgres://u:pw@h") == f"password=abc postgres://u:{R}@h"
    assert redact({"password": "abc"}) == {"password": "abc"}
    assert preview_json('{"password": "abc"}') == '{"password": "abc"}'


@override_settings(ULTIMATE_JOBS={"REDACT_KEYS": ["Card-Number", "ssn"], "REDACT_KEYS_EXTRA": ["SSN", "pin"]})
def test_fragments_are_normalized_and_deduplicated() -> None:
    assert redact_keys() == ("card_number", "ssn", "pin")
    assert redact({"card-number": 1, "Card_Number": 2, "pins": "x", "n": 1}) == {
        "card-number": R, "Card_Number": R, "pins": R, "n": 1}
    shown = redact_text("card-number=4111 cardnumber=4111 card_number=4111")
    assert shown == f"card-number={R} cardnumber={R} card_number={R}"


# -- the JSON preview (the admin's payload column), cut short --------------------------------------


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


@pytest.mark.parametrize(("text", "shown"), [
    ('{"password": "abc", "n": 1}', f'{{"password": "{R}", "n": 1}}'),
    ('{"password": "", "n": "v"}', f'{{"password": "{R}", "n": "v"}}'),
    ('{"password": {"a": [1, 2]}, "n": 1}', f'{{"password": "{R}", "n": 1}}'),
    ('{"password": 12345, "n": 1}', f'{{"password": "{R}", "n": 1}}'),
    ('{"n": 1, "secret":   "v"}', f'{{"n": 1, "secret":   "{R}"}}'),
    ('{"a": {"b": 1}, "token": true}', f'{{"a": {{"b": 1}}, "token": "{R}"}}'),
    ('{"a": [{"token": 1}, "token"], "b": "token"}', f'{{"a": [{{"token": "{R}"}}, "token"], "b": "token"}}'),
    ('{"a": "postgres://u:pw', f'{{"a": "postgres://u:{R}'),
    ('["password", "x"]', f'["password", "{R}"]'),
    ('{"password": "ab', f'{{"password": "{R}"'),
    ('{"password": [1, 2', f'{{"password": "{R}"'),
    ('{"password"', '{"password"'),
    ('}{"token": 1}', f'}}{{"token": "{R}"}}'),
])
def test_a_json_preview_is_masked_exactly_even_when_cut(text: str, shown: str) -> None:
    assert preview_json(text, limit=500) == shown


def test_a_preview_is_cut_to_its_limit_with_an_ellipsis() -> None:
    assert preview_json('{"a": 1}', limit=8) == '{"a": 1}'
    assert preview_json('{"a": 12}', limit=8) == '{"a": 1\u2026'
    assert preview_json('{"a": "' + "x" * 300 + '"}') == '{"a": "' + "x" * 112 + "\u2026"  # default limit 120
    assert preview_json(None) == ""
    assert preview_json('{"a": 1}', sensitive=True) == R


# -- the log filter --------------------------------------------------------------------------------


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


def test_the_log_filter_rewrites_only_what_it_masks() -> None:
    plain = logging.LogRecord("ultimate_jobs", logging.INFO, __file__, 1, "jobs.x %s", ("fine",), None)
    assert RedactingFilter().filter(plain) is True
    assert (plain.msg, plain.args) == ("jobs.x %s", ("fine",))  # untouched: the handler formats as usual
    secret = logging.LogRecord("ultimate_jobs", logging.INFO, __file__, 1, "jobs.x %s", ("token=abc",), None)
    assert RedactingFilter().filter(secret) is True
    assert (secret.msg, secret.args) == (f"jobs.x token={R}", None)
    try:
        raise ValueError("api_key=abc")
    except ValueError:
        failed = logging.LogRecord("ultimate_jobs", logging.ERROR, __file__, 1, "boom", None, sys.exc_info())
    RedactingFilter().filter(failed)
    assert failed.exc_text is not None and failed.exc_text.endswith(f"ValueError: api_key={R}")
    failed.exc_text = "kept as formatted"
    RedactingFilter().filter(failed)
    assert failed.exc_text == "kept as formatted"  # a record already formatted is not formatted again


# -- the gaps issue 25 closed: camelCase keys, a token alone in a URL, a flag's separate value ------


@pytest.mark.parametrize("key", ["privateKey", "apiKey", "PrivateKey", "privatekey", "PRIVATE_KEY", "authToken",
                                 "sessionId", "xApiKey", "APIKey", "clientSecret", "passWord", "private-Key"])
def test_camel_case_keys_are_masked_in_data_and_text(key: str) -> None:
    assert redact({"outer": [{key: SECRET, "kept": "visible"}]}) == {"outer": [{key: REDACTED, "kept": "visible"}]}
    assert redact([[key, SECRET]]) == [[key, REDACTED]]
    assert redact({"name": key, "value": SECRET}) == {"name": key, "value": REDACTED}
    for text in (f"{key}={SECRET}", f'{{"{key}": "{SECRET}"}}', f"{key}: {SECRET}"):
        assert SECRET not in (redact_text(text) or ""), text
    assert SECRET not in preview_json(json.dumps({key: SECRET}), limit=10_000)


def test_a_camel_case_count_under_a_plural_is_still_a_count() -> None:
    assert redact({"tokensUsed": 1200, "sessionsTotal": 3, "tokenCount": 5}) == {
        "tokensUsed": 1200, "sessionsTotal": 3, "tokenCount": R}


@pytest.mark.parametrize(("text", "shown"), [
    (f"git clone https://{SECRET}@github.com/acme/repo.git", f"git clone https://{R}@github.com/acme/repo.git"),
    (f"fetch failed: http://{SECRET}@host:8080/x", f"fetch failed: http://{R}@host:8080/x"),
    (f"https://user:{SECRET}@host/", f"https://user:{R}@host/"),
    ("see https://example.com/a@b", "see https://example.com/a@b"),  # an "@" in the path is no userinfo
])
def test_a_token_alone_in_a_urls_userinfo_is_masked(text: str, shown: str) -> None:
    assert redact_text(text) == shown
    assert redact_text(shown) == shown
    assert redact({"u": text}) == {"u": shown}
    assert SECRET not in preview_json(json.dumps({"u": text}), limit=10_000) or SECRET not in text


@pytest.mark.parametrize(("text", "shown"), [
    (f"pg_dump --password {SECRET} --host db", f"pg_dump --password {R} --host db"),
    (f"cli --token {SECRET}", f"cli --token {R}"),
    (f"cli --api-key '{SECRET} two' -v", f"cli --api-key '{R}' -v"),
    (f"cli --password={SECRET} --host db", f"cli --password={R} --host db"),
    (f"cli --client-secret\t{SECRET}", f"cli --client-secret\t{R}"),
    ("cli --token --verbose", "cli --token --verbose"),  # a flag with no value shows as it is
    ("cli --tokens", "cli --tokens"),
])
def test_a_flags_separate_value_is_masked(text: str, shown: str) -> None:
    assert redact_text(text) == shown
    assert redact_text(shown) == shown


@override_settings(ULTIMATE_JOBS={"REDACT_KEYS_EXTRA": ["___", "_pin"]})
def test_odd_fragments_neither_loop_nor_miss() -> None:
    assert redact_text("pin=1 user_pin=2 n=3") == f"pin={R} user_pin={R} n=3"
    assert redact({"userPin": 1, "n": 2}) == {"userPin": R, "n": 2}
