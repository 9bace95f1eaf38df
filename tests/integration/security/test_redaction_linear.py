"""Redaction in linear time on the surfaces a real run reaches (issue 25): a job whose exception
carries a 1 MiB one-word string settles at once (the stored traceback, the span's event, the log
record), and ``ops``, the admin changelist of 10 such rows and its job page, and the CLI answer in
seconds (before: a 20,000-character word took 55 s; the changelist with 10 rows 28.6 s) -- with the
secrets this test planted beside the big words masked on each."""

from __future__ import annotations

import logging
import random
import time
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from tests.factories import JobFactory
from tests.integration.observability.test_tracing import spans  # noqa: F401  (the fixture)
from ultimate_jobs import NO_TENANT, Retry, ops
from ultimate_jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)
MIB = 1 << 20
BOUND = 20.0  # seconds for a whole surface; quadratic redaction of 1 MiB took hours
PW, TOKEN = "Planted-Pw-3e1f", "Planted-Url-77aa"


def _word() -> str:
    return random.Random(25).randbytes(MIB // 2).hex()


def test_a_run_settles_and_every_surface_answers_in_seconds(declare, make_worker, caplog, spans) -> None:  # noqa: F811
    word = _word()

    @declare(name="tests.big_word", idempotency_key="{ref}", tenant=NO_TENANT, retry=Retry(attempts=1))
    def big_word(ctx, *, ref: str) -> None:  # the input limit is 1 MiB: the body makes its own word
        blob = _word()
        raise ValueError(f"password={PW} {blob} https://{TOKEN}@git.example.com {blob}")

    result = big_word.enqueue(ref="x")
    with caplog.at_level(logging.DEBUG, logger="ultimate_jobs"):
        start = time.perf_counter()
        make_worker(queues=["default"], burst=True).run(install_signals=False)
        assert time.perf_counter() - start < BOUND
    row = Job.objects.get(id=result.id)
    assert row.state == "dead" and "ValueError" in row.last_error and word[-1000:] in row.last_error
    events = [e for s in spans.get_finished_spans() for e in s.events if e.name == "exception"]
    assert events, "the failed attempt recorded no span event"
    exported = " ".join(str(v) for e in events for v in e.attributes.values())
    shown = {"stored": row.last_error, "logs": caplog.text, "span": exported}
    for where, text in shown.items():
        assert PW not in text and TOKEN not in text, where

    for n in range(10):  # 10 rows whose error and payload hold the big word and the secrets, planted whole
        half = len(word) // 2
        JobFactory(dead=True, name="tests.big_word",
                   last_error=f"ValueError: {word[:half]} password={PW} {word[half:]}",
                   payload={"blob": f"{word[:half]} https://{TOKEN}@h {word[half:]}", "password": PW, "ref": str(n)})
    client = Client()
    client.force_login(User.objects.create_superuser("root", "r@example.com", "pw"))
    timed: dict[str, tuple[float, str]] = {}
    for where, read in {
        "ops.get_job": lambda: str(ops.get_job(str(result.id))),
        "ops.list_jobs": lambda: str(ops.list_jobs(limit=50)),
        "changelist": lambda: client.get("/admin/ultimate_jobs/job/").content.decode(),
        "job page": lambda: client.get(f"/admin/ultimate_jobs/job/{result.id}/change/").content.decode(),
        "cli show": lambda: _cli("show", str(result.id)),
        "cli ls": lambda: _cli("ls", "--limit", "50"),
    }.items():
        start = time.perf_counter()
        text = read()
        timed[where] = (time.perf_counter() - start, text)
    for where, (took, text) in timed.items():
        assert took < BOUND, f"{where}: {took:.1f} s"
        assert PW not in text and TOKEN not in text, where
    assert "tests.big_word" in timed["changelist"][1]


def _cli(*args: str) -> str:
    out, err = StringIO(), StringIO()
    call_command("jobs", *args, stdout=out, stderr=err)
    return out.getvalue() + err.getvalue()
