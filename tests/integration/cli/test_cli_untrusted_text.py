"""Stored text reaches the terminal inert (issue 25): a job name, tenant, payload and error this test
planted with bidi overrides (U+202E, U+2066-U+2069), C0/C1 controls, ``rich`` markup and emoji codes
print escaped or literally from ``jobs ls``, ``jobs show`` and ``--json`` -- never as the controls,
never as styling, ``:warning:`` never as an emoji -- and ``--json`` still parses to the planted values."""

from __future__ import annotations

import json

import pytest

from tests.cli import cli
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db(transaction=True)
NAME = "tests.noop:warning:\u202egpj.exe"
TENANT = "acme\u2066\u202ecorp\u2069"
ERROR = "RuntimeError: :warning: [bold red]boom[/bold red] \u202eevil\x1b[2Jcleared\x9b31m\u200fend"
PAYLOAD = {"note": ":fire: \u202ereversed\u2028next", "bell": "\x07\x85"}
RAW = ("\u202e", "\u2066", "\u2069", "\u200f", "\u2028", "\x1b", "\x9b", "\x07", "\x85")


def _planted() -> str:
    job = JobFactory(dead=True, name=NAME, tenant_id=TENANT, last_error=ERROR, payload=PAYLOAD)
    return str(job.id)


def test_show_and_ls_print_stored_text_escaped_and_literally() -> None:
    job_id = _planted()
    for args in (("show", job_id), ("ls",), ("ls", "--state", "dead")):
        code, out, err = cli(*args)
        assert code == 0, err
        for char in RAW:
            assert char not in out, (args, repr(char))
        assert "acme\\u2066\\u202ecorp\\u2069" in out, (args, out)
        assert "\u26a0" not in out and "\U0001f525" not in out, args  # no emoji for :warning: / :fire:
        assert job_id[:8] in out and "tests.noop:warning:\\u202eg" in out, (args, out)  # a cell may be cut
    _, shown, _ = cli("show", job_id)
    assert "tests.noop:warning:\\u202egpj.exe" in shown
    assert ":warning: [bold red]boom[/bold red] \\u202eevil\\x1b[2Jcleared\\x9b31m\\u200fend" in shown
    assert "acme\\u2066\\u202ecorp\\u2069" in shown


def test_json_output_escapes_the_same_characters_and_parses_to_the_planted_values() -> None:
    job_id = _planted()
    for args in (("show", job_id, "--json"), ("ls", "--json")):
        code, out, err = cli(*args)
        assert code == 0, err
        for char in RAW:
            assert char not in out, (args, repr(char))
        data = json.loads(out)
        row = data if args[0] == "show" else next(j for j in data["jobs"] if j["id"] == job_id)
        assert (row["name"], row["tenant_id"], row["last_error"]) == (NAME, TENANT, ERROR)
        if args[0] == "show":
            assert row["payload"] == PAYLOAD
