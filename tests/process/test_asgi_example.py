"""The example project under a real ASGI server: uvicorn serves ``example_project/asgi.py`` from a
subprocess on a free port, against this suite's test database, and a real HTTP request reaches
the ``async def`` view that enqueues with ``aenqueue``. The evidence is the job row it wrote."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection

from tests.conftest import BACKEND, ROOT
from ultimate_jobs.models import Job

pytestmark = pytest.mark.process


def _database_url() -> str:
    """The suite's test database in django-environ's syntax, which the example's settings read."""
    db = connection.settings_dict
    if BACKEND == "sqlite":
        return f"sqlite:///{db['NAME']}"
    user = urllib.parse.quote(db["USER"] or "postgres")
    password = f":{urllib.parse.quote(db['PASSWORD'])}" if db["PASSWORD"] else ""
    return f"postgres://{user}{password}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def server(transactional_db: None, tmp_path: Any) -> Iterator[str]:
    """``uvicorn example_project.asgi:application`` on a free port; answers its base URL."""
    port = _free_port()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "example_project.settings", "DATABASE_URL": _database_url(),
           "PYTHONPATH": str(ROOT)}
    log = open(tmp_path / "uvicorn.log", "wb")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "example_project.asgi:application", "--host",
                             "127.0.0.1", "--port", str(port), "--log-level", "warning"],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"uvicorn exited {proc.returncode}:\n{(tmp_path / 'uvicorn.log').read_text()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError("uvicorn did not listen within 30 s") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(15)
        log.close()


def post(url: str, **form: str) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, data=urllib.parse.urlencode(form).encode(), method="POST")
    try:
        with urllib.request.urlopen(request, timeout=15) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


def test_an_async_view_under_uvicorn_enqueues_with_aenqueue(server: str) -> None:
    status, body = post(f"{server}/shop/orders/42/paid", shop="acme")
    assert (status, body["deduped"], body["staged"]) == (202, False, False)  # direct: autocommit
    row = Job.objects.get(id=body["job_id"])
    assert (row.name, row.state, row.tenant_id, row.queue) == ("shop.send_receipt", "ready", "acme", "emails")
    assert (row.payload, row.idempotency_key) == ({"shop": "acme", "order_id": 42, "batch": "web"}, "receipt:web:42")

    again_status, again = post(f"{server}/shop/orders/42/paid", shop="acme")  # the provider retried its notice
    assert (again_status, again["job_id"], again["deduped"]) == (202, body["job_id"], True)
    assert Job.objects.count() == 1

    others = [post(f"{server}/shop/orders/{n}/paid", shop="globex") for n in range(1, 4)]
    assert [s for s, _ in others] == [202] * 3
    assert Job.objects.filter(tenant_id="globex").count() == 3

    refused_status, refused = post(f"{server}/shop/orders/7/paid", shop="")  # no tenant: aenqueue refuses
    assert (refused_status, refused["error"]) == (400, "X_JOB_INPUT_INVALID")
    assert Job.objects.count() == 4
