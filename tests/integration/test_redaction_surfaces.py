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

from ultimate_jobs import NO_TENANT, Retry, Worker
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


def test_secrets_never_reach_any_surface(declare, caplog) -> None:
    password, api_key, bearer = SECRETS

    @declare(name="tests.leaky", idempotency_key="{ref}", tenant=NO_TENANT, retry=Retry(attempts=1))
    def leaky(ctx, *, ref: str, password: str, items: list, headers: dict) -> None:
        raise PermissionError(f"login refused for password={password} items={items!r} "
                              f"headers={headers!r} Authorization: Bearer {bearer}")

    with caplog.at_level(logging.DEBUG, logger="ultimate_jobs"):
        r = leaky.enqueue(ref="x", password=password, items=[{"name": "a", "api_key": api_key}],
                          headers={"Authorization": f"Bearer {bearer}"})
        Worker(queues=["default"], burst=True).run(install_signals=False)
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
