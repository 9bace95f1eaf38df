"""``jobs enqueue NAME --input JSON [--queue Q] [--delay D] [--tenant T] [--json]`` and
``ops.enqueue_job``: one run through the one enqueue path, every refusal coded (exit 1) with
nothing written."""

from __future__ import annotations

import json

import pytest
from django.db import transaction
from django.test import override_settings

from tests.cli import cli
from ultimate_jobs import NO_TENANT, JobsError, ops
from ultimate_jobs.models import Job, OutboxEntry

pytestmark = pytest.mark.django_db(transaction=True)


def test_enqueue_writes_the_row_the_input_and_options_name() -> None:
    code, out, err = cli("--by", "alice", "enqueue", "tests.tenant_noop", "--input", '{"key": "from-cli", "org": '
                         '"acme"}', "--queue", "other", "--delay", "10m", "--tenant", "acme", "--json")
    assert code == 0, err
    answer = json.loads(out)
    row = Job.objects.get(id=answer["id"])
    assert (row.name, row.queue, row.state, row.payload, row.tenant_id, row.enqueued_by) == (
        "tests.tenant_noop", "other", "delayed", {"key": "from-cli", "org": "acme"}, "acme", "alice")
    assert answer == {"id": str(row.id), "run_id": str(row.run_id), "name": "tests.tenant_noop", "queue": "other",
                      "deduped": False, "staged": False}
    # The same key while the first is live: the first job, deduped.
    code, out, _ = cli("enqueue", "tests.tenant_noop", "--input", '{"key": "from-cli", "org": "acme"}')
    assert code == 0 and out == f"{row.id}: deduped into the live job holding its key (tests.tenant_noop on " \
                                "default)\n"
    assert Job.objects.count() == 1


def test_a_job_without_arguments_needs_no_input(declare) -> None:
    @declare(name="tests.cli.arm", idempotency_key="arm", tenant=NO_TENANT)
    def arm(ctx) -> None: ...

    code, out, _ = cli("enqueue", "tests.cli.arm")
    row = Job.objects.get()
    assert code == 0 and (row.name, row.payload) == ("tests.cli.arm", {})
    assert out == f"{row.id}: enqueued (tests.cli.arm on default)\n"


@pytest.mark.parametrize(("args", "code"), [
    (["tests.no-such-job"], "X_JOB_NOT_REGISTERED"),
    (["tests.noop", "--input", "{not json"], "X_JOB_INPUT_INVALID"),
    (["tests.noop", "--input", "[1, 2]"], "X_JOB_INPUT_INVALID"),
    (["tests.noop", "--input", "{}"], "X_JOB_INPUT_INVALID"),
    (["tests.noop", "--input", '{"key": "k", "extra": 1}'], "X_JOB_INPUT_INVALID"),
    (["tests.noop", "--input", '{"key": "k"}', "--delay", "soon"], "X_JOB_INPUT_INVALID"),
    (["tests.noop", "--input", '{"key": "k"}', "--queue", "Not A Queue"], "X_QUEUE_INVALID"),
    (["tests.tenant_noop", "--input", '{"key": "k", "org": "acme"}', "--tenant", "globex"],
     "X_JOB_TENANT_MISMATCH"),
])
def test_refusals_are_coded_exit_1_and_write_nothing(args: list[str], code: str) -> None:
    exit_code, out, err = cli("enqueue", *args)
    assert (exit_code, out) == (1, "") and err.startswith(f"{code}: ") and "\nFix: " in err
    exit_code, out, _ = cli("enqueue", *args, "--json")
    assert exit_code == 1 and json.loads(out)["error"]["code"] == code
    assert not Job.objects.exists() and not OutboxEntry.objects.exists()


def test_with_outbox_required_the_enqueue_is_staged_in_its_own_transaction() -> None:
    with override_settings(ULTIMATE_JOBS={"OUTBOX": "required"}):
        answer = ops.enqueue_job("tests.noop", {"key": "required"}, by="ops-test")
    assert (answer["staged"], answer["deduped"]) == (True, None)
    entry = OutboxEntry.objects.get(id=answer["id"])
    assert (entry.name, entry.published_at, entry.enqueued_by) == ("tests.noop", None, "ops-test")
    assert not Job.objects.exists()


def test_inside_a_callers_transaction_it_is_staged_with_it() -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        assert ops.enqueue_job("tests.noop", '{"key": "rolled-back"}')["staged"] is True
        raise RuntimeError("rolled back")
    assert not OutboxEntry.objects.exists()
    with pytest.raises(JobsError) as refused:
        ops.enqueue_job("tests.noop", {"key": 1, "nope": 2})
    assert refused.value.code == "X_JOB_INPUT_INVALID"
