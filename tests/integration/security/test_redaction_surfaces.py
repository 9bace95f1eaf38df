"""A secret in a payload and in an exception message never reaches admin HTML, CLI output,
captured logs or the stored error."""

from __future__ import annotations

import json
import logging
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from ultimate_jobs import NO_TENANT, Retry
from ultimate_jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)
SECRETS = ("hunter2-pw", "sk-live-9f8e7d", "eyJhbGciOiJIUzI1NiJ9.tok")


def _cli(*args: str) -> str:
    out, err = StringIO(), StringIO()
    try:
        call_command("jobs", *args, stdout=out, stderr=err)
    except SystemExit:
        pass
    return out.getvalue() + err.getvalue()


def test_secrets_never_reach_any_surface(declare, caplog, make_worker) -> None:
    password, api_key, bearer = SECRETS

    @declare(name="tests.leaky", idempotency_key="{ref}", tenant=NO_TENANT, retry=Retry(attempts=1))
    def leaky(ctx, *, ref: str, password: str, items: list, headers: dict) -> None:
        raise PermissionError(f"login refused for password={password} items={items!r} "
                              f"headers={headers!r} Authorization: Bearer {bearer}")

    with caplog.at_level(logging.DEBUG, logger="ultimate_jobs"):
        r = leaky.enqueue(ref="x", password=password, items=[{"name": "a", "api_key": api_key}],
                          headers={"Authorization": f"Bearer {bearer}"})
        make_worker(queues=["default"], burst=True).run(install_signals=False)
        logging.getLogger("ultimate_jobs").error("jobs.test.echo payload=%s", {"password": password})

    stored = Job.objects.get(id=r.id)
    assert stored.state == "dead" and "PermissionError" in stored.last_error
    surfaces = {"stored error": stored.last_error, "logs": caplog.text}

    client = Client()
    client.force_login(User.objects.create_superuser("root", "r@example.com", "pw"))
    surfaces["changelist"] = client.get("/admin/ultimate_jobs/job/").content.decode()
    surfaces["job page"] = client.get(f"/admin/ultimate_jobs/job/{r.id}/change/").content.decode()
    surfaces["cli show"] = _cli("show", str(r.id))
    surfaces["cli show --json"] = _cli("show", str(r.id), "--json")
    surfaces["cli ls"] = _cli("ls", "--json")
    for where, text in surfaces.items():
        for secret in SECRETS:
            assert secret not in text, f"{secret!r} leaked into the {where}"
    assert "[redacted]" in surfaces["job page"] and "[redacted]" in surfaces["cli show"]
    assert json.loads(surfaces["cli show --json"])["payload"]["items"][0]["name"] == "a"


def _backfill_cli(*args: str) -> str:
    out, err = StringIO(), StringIO()
    try:
        call_command("jobs_backfill", *args, stdout=out, stderr=err)
    except SystemExit:
        pass
    return out.getvalue() + err.getvalue()


def test_backfill_errors_are_redacted_in_the_ledger_and_the_cli(declare_backfill, make_worker) -> None:
    from tests.app.models import Post

    password = SECRETS[0]
    Post.objects.create(title="p")

    def handle(batch: list) -> None:
        raise RuntimeError(f"insert failed on postgres://app:{password}@db/shop with password={password}")

    def count(ctx: object) -> int:
        raise RuntimeError(f"count failed: api_key={password}")

    declare_backfill(name="bf.leaky.handle", source=lambda ctx: Post.objects.all(), handle=handle)
    declare_backfill(name="bf.leaky.count", source=lambda ctx: Post.objects.all(), handle=lambda batch: None,
                     count=count)
    # With --wait the gate counts the rows first: count() raising is the CLI's refusal to print.
    written = _backfill_cli("bf.leaky.handle", "--write") + _backfill_cli("bf.leaky.count", "--write", "--wait")
    written_json = _backfill_cli("bf.leaky.count", "--write", "--wait", "--json")
    make_worker(queues=["default"], burst=True).run(install_signals=False)
    from ultimate_jobs.models import BackfillRun

    (run,) = BackfillRun.objects.filter(name="bf.leaky.handle")
    assert run.status == "failed" and "postgres://app:[redacted]@db/shop" in run.last_error
    assert "count failed: api_key=[redacted]" in written
    surfaces = {"ledger": run.last_error, "cli --write": written, "cli --write --json": written_json,
                "cli --list": _backfill_cli("--list", "--json")}
    for where, text in surfaces.items():
        assert password not in text, f"the secret leaked into the {where}"


def test_a_sensitive_jobs_error_text_and_step_errors_hide_its_values(declare, make_worker) -> None:
    card = "4111-1111-1111-1111"

    @declare(name="tests.sensitive_card", idempotency_key="{ref}", tenant=NO_TENANT, retry=Retry(attempts=1),
             sensitive=True)
    def charge(ctx, *, ref: str, card: str) -> None:
        def authorize() -> None:
            raise ValueError(f"card {card} declined by the gateway")

        ctx.step.run("authorize", authorize)

    r = charge.enqueue(ref="s", card=card)
    make_worker(queues=["default"], burst=True).run(install_signals=False)
    stored = Job.objects.get(id=r.id)
    from ultimate_jobs.models import JobStep

    step = JobStep.objects.get(run_id=stored.run_id, name="authorize").error
    assert stored.state == "dead" and "ValueError: [redacted]" in stored.last_error
    assert "ValueError: [redacted]" in step and 'raise ValueError(f"card {card} declined' in step  # the frame stays
    for where, text in {"last_error": stored.last_error, "step error": step, "cli show": _cli("show", str(r.id)),
                        "cli show --json": _cli("show", str(r.id), "--json")}.items():
        assert card not in text, f"the card number leaked into the {where}"
