"""``sensitive=True`` is stored on the job row (SPEC §10, issue 25): a process that never imported
the declaration -- ops, the admin, the CLI in a fresh process -- still shows ``[redacted]`` for the
payload it planted, whichever insert path wrote the row (one INSERT, a batch, PostgreSQL's binary
COPY, the outbox and its relay), and a row planted with ``sensitive = true`` is masked too."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.test import Client

from ultimate_jobs import NO_TENANT, ops
from ultimate_jobs.db.postgres.inserts import COPY_MIN_ROWS
from ultimate_jobs.models import Job
from ultimate_jobs.outbox import Relay
from ultimate_jobs.redact import REDACTED

pytestmark = pytest.mark.django_db(transaction=True)
CARD = "4111-PLANTED-9917"


def _admin_html(path: str) -> str:
    client = Client()
    client.force_login(User.objects.get_or_create(username="root", defaults={"is_superuser": True,
                                                                             "is_staff": True})[0])
    return client.get(path).content.decode()


def test_every_insert_path_stores_the_flag_and_readers_without_the_declaration_mask(declare, declared,
                                                                                    worker_process) -> None:
    @declare(name="tests.sensitive_row", idempotency_key="{ref}", tenant=NO_TENANT, sensitive=True)
    def charge(ctx, *, ref: str, card: str) -> None: ...

    @declare(name="tests.plain_row", idempotency_key="{ref}", tenant=NO_TENANT)
    def plain(ctx, *, ref: str, card: str) -> None: ...

    one = charge.enqueue(ref="one", card=CARD)
    charge.enqueue_many([{"ref": f"small-{i}", "card": CARD} for i in range(3)])
    charge.enqueue_many([{"ref": f"copy-{i}", "card": CARD} for i in range(COPY_MIN_ROWS + 5)])  # COPY on PG
    with transaction.atomic():
        staged = charge.enqueue(ref="staged", card=CARD)
    assert staged.staged is True
    Relay(relay_id="tests").run_once()
    plain_one = plain.enqueue(ref="p", card=CARD)

    flags = dict(Job.objects.filter(name="tests.sensitive_row").values_list("idempotency_key", "sensitive"))
    assert len(flags) == 1 + 3 + COPY_MIN_ROWS + 5 + 1 and set(flags.values()) == {True}
    assert Job.objects.get(id=plain_one.id).sensitive is False

    declared.forget()  # from here on this process knows neither declaration, as ops/admin/CLI elsewhere
    Job.objects.filter(id=plain_one.id).update(sensitive=True)  # a row planted with the flag set

    for job_id in (one.id, staged.id, plain_one.id):
        shown = ops.get_job(str(job_id))
        assert shown["payload"] == REDACTED and shown["sensitive"] is True, shown
    listed = ops.list_jobs(limit=200)["jobs"]
    assert listed and all(row["payload"] == REDACTED for row in listed)
    assert CARD not in json.dumps(listed)
    changelist = _admin_html("/admin/ultimate_jobs/job/")
    assert "tests.sensitive_row" in changelist and CARD not in changelist
    page = _admin_html(f"/admin/ultimate_jobs/job/{plain_one.id}/change/")
    assert "tests.plain_row" in page and CARD not in page and REDACTED in page

    for job_id in (one.id, plain_one.id):  # a fresh process that never imported either declaration
        cli = worker_process("show", str(job_id), "--json", command="jobs")
        assert cli.wait(60) == 0, cli.output()
        output = cli.output()
        assert str(job_id) in output and CARD not in output and REDACTED in output, output


def test_a_worker_masks_a_run_by_the_rows_flag(declare, make_worker) -> None:
    from ultimate_jobs import Retry

    @declare(name="tests.flagged_by_row", idempotency_key="{ref}", tenant=NO_TENANT, retry=Retry(attempts=1))
    def flagged(ctx, *, ref: str, card: str) -> None:
        raise ValueError(f"card {card} declined")

    result = flagged.enqueue(ref="r", card=CARD)
    Job.objects.filter(id=result.id).update(sensitive=True)  # planted: the declaration says nothing
    make_worker(queues=["default"], burst=True).run(install_signals=False)
    row = Job.objects.get(id=result.id)
    assert row.state == "dead" and "ValueError" in row.last_error and REDACTED in row.last_error
    assert CARD not in row.last_error and all(CARD not in (a.get("error") or "") for a in row.attempts)


def test_the_migration_adds_the_columns_without_rewriting_the_table() -> None:
    """On PostgreSQL 11+ ``ADD COLUMN ... DEFAULT false NOT NULL`` (a constant default) is a
    catalogue change: no row is rewritten, and no UPDATE backfills the old rows."""
    from io import StringIO

    from django.core.management import call_command
    from django.db import connection

    out = StringIO()
    call_command("sqlmigrate", "ultimate_jobs", "0014", stdout=out)
    sql = out.getvalue()
    assert "UPDATE" not in sql.upper().replace("UPDATED_AT", ""), sql
    if connection.vendor != "postgresql":
        return
    assert 'ADD COLUMN "sensitive" boolean DEFAULT false NOT NULL' in sql, sql
    assert "DROP DEFAULT" not in sql, sql  # the default stays: raw INSERTs that omit the column read false
