"""The redactor (``ultimate_jobs/redact.py``) against whole outputs worked out by hand: each case
names the exact text or data a surface shows, so a mutant that masks too much (a key that is not
secret, the text after a value) fails as surely as one that masks too little. They kill the
mutants the leak-only tests (``SECRET not in ...``) let live (``make mutation``)."""

from __future__ import annotations

import logging
import sys

import pytest
from django.test import override_settings

from ultimate_jobs.redact import REDACTED, RedactingFilter, preview_json, redact, redact_keys, redact_text

R = REDACTED


def test_the_default_fragments_in_force() -> None:
    assert redact_keys() == ("password", "passwd", "pwd", "secret", "token", "api_key", "apikey", "private_key",
                             "authorization", "cookie", "session", "signature", "credential", "dsn")


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


def test_sensitive_data_is_hidden_whole_but_none_stays_none() -> None:
    assert redact({"a": 1}, sensitive=True) == R
    assert redact(0, sensitive=True) == R
    assert redact(None, sensitive=True) is None
    assert redact({"a": 1}, sensitive=False) == {"a": 1}


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


def test_text_none_and_sensitive() -> None:
    assert redact_text(None) is None
    assert redact_text("password=1", sensitive=True) == R
    assert redact_text("plain", sensitive=False) == "plain"


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
