"""Hostile input at the boundary: NUL in free text, per-call options out of range, a bad or
unimportable TENANT_OF, a concurrency key pushed past its column, "default\\n" as a queue,
non-string JSON keys and oversized results — each a coded JobsError (or a coded failed attempt),
nothing written; a refusal of the enqueue is checked whole (code, cause naming the value, fix)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from django.db import transaction
from django.test import override_settings

from tests.app.jobs import noop
from tests.error_codes import refused
from ultimate_jobs import NO_TENANT, Concurrency, JobsError, Retry, ops
from ultimate_jobs.models import Job, JobStep, OutboxEntry

pytestmark = pytest.mark.django_db(transaction=True)
ANSWERS: dict[str, Any] = {}
NAIVE = datetime(2030, 1, 1, 12)


def tenant_of(user: object) -> Any:
    """``TENANT_OF`` for these tests: answers what the test planted."""
    return ANSWERS["tenant"]


@pytest.fixture
def per_org(declare):
    @declare(name="tests.security.input.per_org", idempotency_key="{org}:{n}", tenant="{org}")
    def per_org(ctx, *, org: str, n: int, data: Any = None) -> None: ...

    return per_org


def _nothing_written() -> None:
    assert not Job.objects.exists() and not OutboxEntry.objects.exists()


def _refused(code: str, call: Any) -> JobsError:
    with pytest.raises(JobsError) as err:
        call()
    assert err.value.code == code, err.value
    return err.value


@pytest.mark.parametrize("atomic", [False, True])
def test_nul_in_per_call_text_is_refused_before_anything_is_written(per_org, atomic: bool) -> None:
    calls = [lambda: per_org.using(tenant_id="acme\x00").enqueue(org="acme", n=1),
             lambda: per_org.using(enqueued_by="ann\x00").enqueue(org="acme", n=2)]
    for call in calls:
        if atomic:
            with transaction.atomic():
                _refused("X_JOB_INPUT_INVALID", call)
        else:
            _refused("X_JOB_INPUT_INVALID", call)
    _nothing_written()


@pytest.mark.parametrize(("options", "cause"), [
    ({"delay": "1s", "run_at": NAIVE}, "using() takes delay= or run_at=, not both."),
    ({"delay": "soon"}, "delay='soon' is not a duration."),
    ({"delay": -1}, "delay=-1 must be zero or more."),
    ({"priority": True}, "priority=True must be an int."),
    ({"priority": "1"}, "priority='1' must be an int."),
    ({"tenant_id": ""}, "tenant_id='' must be a non-empty string of at most 200 characters without NUL."),
    ({"tenant_id": 5}, "tenant_id=5 must be a non-empty string of at most 200 characters without NUL."),
    ({"tenant_id": "t" * 201},
     f"tenant_id={('t' * 201)!r:.80} must be a non-empty string of at most 200 characters without NUL."),
    ({"tenant_id": "a\x00b"}, "tenant_id='a\\x00b' must be a non-empty string of at most 200 characters without NUL."),
    ({"enqueued_by": "ann\x00"}, "enqueued_by='ann\\x00' holds a NUL character."),
    ({"database": "nope"}, "database='nope' is not in DATABASES."),
])
def test_bad_per_call_options_are_refused_with_the_value(options: dict[str, object], cause: str) -> None:
    with refused("X_JOB_INPUT_INVALID") as caught:
        noop.using(**options).enqueue(key="k")  # type: ignore[arg-type]
    assert caught.error.cause == cause


@pytest.mark.parametrize("run_at", [NAIVE, "2030-01-01T12:00:00Z"])
def test_run_at_must_be_an_aware_datetime(run_at: object) -> None:
    with refused("X_JOB_INPUT_INVALID") as caught:
        noop.using(run_at=run_at).enqueue(key="k")  # type: ignore[arg-type]
    assert caught.error.cause == f"run_at={run_at!r} must be an aware datetime."
    assert caught.error.fix == "Pass django.utils.timezone.now() + timedelta(...), never a naive datetime."


@pytest.mark.parametrize("answer", ["", "acme\x00", "x" * 201, object(), 4.5])
def test_a_tenant_of_answer_that_is_not_a_tenant_is_refused(per_org, settings, answer: object) -> None:
    settings.ULTIMATE_JOBS = {"TENANT_OF": "tests.integration.security.test_input_validation.tenant_of"}
    ANSWERS["tenant"] = answer
    err = _refused("X_CONFIG_INVALID", lambda: per_org.using(enqueued_by="ann").enqueue(org="acme", n=1))
    assert "TENANT_OF" in err.cause
    _nothing_written()
    ANSWERS["tenant"] = 42  # an org's primary key is taken as its string
    _refused("X_JOB_TENANT_MISMATCH", lambda: per_org.using(enqueued_by="ann").enqueue(org="acme", n=1))
    assert per_org.using(enqueued_by="ann").enqueue(org="42", n=1).deduped is False


@override_settings(ULTIMATE_JOBS={"TENANT_OF": "tests.nowhere.tenant_of"})
def test_an_unimportable_tenant_of_is_a_configuration_error() -> None:
    with refused("X_CONFIG_INVALID") as caught:
        noop.using(enqueued_by="ann@acme").enqueue(key="k")
    assert caught.error.cause.startswith("ULTIMATE_JOBS['TENANT_OF']='tests.nowhere.tenant_of' cannot be imported: ")


def answering(value: object) -> object:
    """TENANT_OF for the test below: answers whatever ``PLANTED`` holds."""
    return PLANTED[0]


PLANTED: list[object] = [None]


@override_settings(ULTIMATE_JOBS={"TENANT_OF": f"{__name__}.answering"})
def test_only_a_tenant_id_is_accepted_from_tenant_of() -> None:
    from uuid import UUID

    fix = ("Return the user's tenant id (a string of 1-200 characters without NUL, an int or a UUID), or None for "
           "a user of no tenant.")
    for bad in ["", "t" * 201, "ac\x00me", True, 1.5]:
        PLANTED[0] = bad
        with refused("X_CONFIG_INVALID") as caught:
            noop.using(enqueued_by="ann").enqueue(key="k")
        assert caught.error.fix == fix, bad
    for good, stored in [("t" * 200, "t" * 200), (UUID(int=5), "00000000-0000-0000-0000-000000000005")]:
        PLANTED[0] = good
        assert Job.objects.get(id=noop.using(enqueued_by="ann").enqueue(key=stored[:8]).id).tenant_id == stored


def test_a_concurrency_key_whose_name_prefix_overflows_its_column_is_refused(declare) -> None:
    long_name = "tests.security." + "n" * 150

    @declare(name=long_name, idempotency_key="{account}", tenant=NO_TENANT,
             concurrency=Concurrency(key="{account}", limit=1))
    def keyed(ctx, *, account: str) -> None: ...

    @declare(name="tests.security.nul_key", idempotency_key="{account}", tenant=NO_TENANT,
             concurrency=Concurrency(key=lambda account, **_: f"{account}\x00", limit=1))
    def nul_key(ctx, *, account: str) -> None: ...

    fits = "a" * (200 - len(long_name) - 1)
    assert keyed.concurrency_key_for(account=fits) == f"{long_name}:{fits}"
    _refused("X_JOB_DECLARATION_INVALID", lambda: keyed.enqueue(account=fits + "a"))
    _refused("X_JOB_DECLARATION_INVALID", lambda: nul_key.enqueue(account="acct"))
    _nothing_written()
    keyed.enqueue(account=fits)
    assert Job.objects.get().concurrency_key == f"{long_name}:{fits}"


@pytest.mark.parametrize("queue", ["default\n", "default\r\n", "emails\n"])
def test_a_queue_name_with_a_trailing_newline_is_refused_everywhere(declare, per_org, settings, queue: str) -> None:
    _refused("X_QUEUE_INVALID", lambda: per_org.using(queue=queue).enqueue(org="acme", n=1))
    _refused("X_QUEUE_INVALID", lambda: ops.pause_queue(queue))
    _refused("X_JOB_DECLARATION_INVALID",
             lambda: declare(name="tests.security.input.q", idempotency_key="{k}", tenant=NO_TENANT, queue=queue)(
                 lambda ctx, *, k: None))
    from ultimate_jobs.checks import check_settings

    settings.ULTIMATE_JOBS = {"QUEUES": [queue]}
    assert [m.id for m in check_settings()] == ["ultimate_jobs.E001"]
    _nothing_written()


def test_non_string_keys_at_any_depth_are_refused_not_coerced(per_org) -> None:
    for data in ({1: "a", "1": "b"}, [{"ok": {2.5: "x"}}], {"nested": {None: 1}}, {"t": {(1, 2): 3}}):
        err = _refused("X_JOB_INPUT_INVALID", lambda data=data: per_org.enqueue(org="acme", n=1, data=data))
        assert "key" in err.cause
    _nothing_written()
    assert per_org.enqueue(org="acme", n=1, data={"1": "a", "nested": [{"2": None}]}).deduped is False


def test_non_string_keys_in_a_step_output_or_a_result_fail_the_run(declare, make_worker) -> None:
    @declare(name="tests.security.input.step_keys", idempotency_key="{k}", tenant=NO_TENANT)
    def step_keys(ctx, *, k: str) -> None:
        ctx.step.run("collapse", lambda: {1: "a", "1": "b"})

    @declare(name="tests.security.input.result_keys", idempotency_key="{k}", tenant=NO_TENANT)
    def result_keys(ctx, *, k: str) -> dict:
        return {1: "a", "1": "b"}

    a, b = step_keys.enqueue(k="a"), result_keys.enqueue(k="b")
    make_worker(queues=["default"], burst=True).run(install_signals=False)
    assert Job.objects.get(id=a.id).error_code == "X_STEP_OUTPUT_UNSERIALIZABLE"
    assert not JobStep.objects.filter(name="collapse", status="completed").exists()
    row = Job.objects.get(id=b.id)
    assert (row.state, row.error_code, row.result) == ("dead", "X_JOB_RESULT_UNSERIALIZABLE", None)


def test_a_result_over_max_result_bytes_fails_the_attempt_and_the_worker_goes_on(declare, settings,
                                                                                 make_worker) -> None:
    settings.ULTIMATE_JOBS = {"MAX_RESULT_BYTES": 1000}

    @declare(name="tests.security.input.big_result", idempotency_key="{n}", tenant=NO_TENANT,
             retry=Retry(attempts=3))
    def big_result(ctx, *, n: int) -> str:
        return "x" * n

    big, small = big_result.enqueue(n=5000), big_result.enqueue(n=10)
    stats = make_worker(queues=["default"], burst=True).run(install_signals=False)
    assert stats["lost"] == 0
    row = Job.objects.get(id=big.id)
    assert (row.state, row.error_code, row.stop_reason, row.result, row.attempt) == (
        "dead", "X_JOB_RESULT_TOO_LARGE", "terminal", None, 1)
    assert "1000-byte limit" in row.last_error
    assert Job.objects.get(id=small.id).result == "x" * 10


def test_nul_in_a_cancel_reason_is_refused_and_the_job_stays_live(per_org) -> None:
    r = per_org.enqueue(org="acme", n=1)
    _refused("X_TEXT_INVALID", lambda: ops.cancel_job(r.id, reason="fat finger\x00"))
    row = Job.objects.get(id=r.id)
    assert (row.state, row.last_error) == ("ready", None)
    assert ops.cancel_job(r.id, reason="duplicate of #12")["state"] == "cancelled"


def test_the_cli_refuses_a_nul_reason_and_an_actor_with_nul_is_stored_escaped(per_org) -> None:
    from io import StringIO

    from django.core.management import call_command

    r = per_org.enqueue(org="acme", n=1)
    out, err = StringIO(), StringIO()
    with pytest.raises(SystemExit) as exit_:
        call_command("jobs", "cancel", str(r.id), "--reason", "oops\x00", stdout=out, stderr=err)
    assert exit_.value.code != 0 and "X_TEXT_INVALID" in out.getvalue() + err.getvalue()
    assert Job.objects.get(id=r.id).state == "ready"
    assert ops.cancel_job(r.id, by="ann\x00")["state"] == "cancelled"
    assert Job.objects.get(id=r.id).last_error == "cancelled by ann\\x00"
