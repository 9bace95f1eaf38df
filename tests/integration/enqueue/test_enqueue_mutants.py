"""The enqueue path (``ultimate_jobs/enqueue.py``) against values the tests choose: each test here
kills mutants the behaviour tests let live (``make mutation``). Every refusal is checked whole
(code, cause naming the value, fix) and leaves every table as it was (``refused``)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.db import transaction
from django.test import override_settings

from tests.app.jobs import noop, tenant_noop
from tests.error_codes import refused
from ultimate_jobs import NO_TENANT
from ultimate_jobs.enqueue import EnqueueOptions, JobInput
from ultimate_jobs.models import Job, OutboxEntry

pytestmark = pytest.mark.django_db(transaction=True)

NAIVE = datetime(2030, 1, 1, 12)


def tenant_of(user: object) -> object:
    """TENANT_OF for these tests: the part after the @, None for a bare name, 7 for "numeric", a list
    for "broken" (not a tenant id)."""
    text = str(user)
    if text == "numeric":
        return 7
    if text == "broken":
        return ["acme"]
    return text.split("@")[1] if "@" in text else None


TENANT_OF = override_settings(ULTIMATE_JOBS={"TENANT_OF": f"{__name__}.tenant_of"})


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


def test_a_zero_delay_and_a_200_character_tenant_are_accepted() -> None:
    row = Job.objects.get(id=noop.using(delay=0, tenant_id="t" * 200).enqueue(key="edge").id)
    assert (row.state, row.tenant_id) == ("ready", "t" * 200)


@override_settings(ULTIMATE_JOBS={"TENANT_OF": "tests.nowhere.tenant_of"})
def test_an_unimportable_tenant_of_is_a_configuration_error() -> None:
    with refused("X_CONFIG_INVALID") as caught:
        noop.using(enqueued_by="ann@acme").enqueue(key="k")
    assert caught.error.cause.startswith("ULTIMATE_JOBS['TENANT_OF']='tests.nowhere.tenant_of' cannot be imported: ")


class User:
    def __init__(self, pk: object) -> None:
        self.pk = pk

    def __str__(self) -> str:
        return "user-object"


def test_the_enqueuer_is_recorded_by_pk_or_as_text_cut_at_200_characters() -> None:
    by_pk = noop.using(enqueued_by=User(42)).enqueue(key="pk")
    by_text = noop.using(enqueued_by="ops-bot").enqueue(key="text")
    long = noop.using(enqueued_by="x" * 300).enqueue(key="long")
    no_pk = noop.using(enqueued_by=User(None)).enqueue(key="nopk")
    assert Job.objects.get(id=by_pk.id).enqueued_by == "42"
    assert Job.objects.get(id=by_text.id).enqueued_by == "ops-bot"
    assert Job.objects.get(id=long.id).enqueued_by == "x" * 200
    assert Job.objects.get(id=no_pk.id).enqueued_by == "user-object"
    assert Job.objects.get(id=noop.enqueue(key="nobody").id).enqueued_by is None


@TENANT_OF
def test_the_enqueuers_tenant_scopes_a_global_job_and_must_agree_with_an_explicit_one() -> None:
    scoped = noop.using(enqueued_by="ann@acme").enqueue(key="s")
    assert Job.objects.get(id=scoped.id).tenant_id == "acme"
    numeric = noop.using(enqueued_by="numeric").enqueue(key="n")
    assert Job.objects.get(id=numeric.id).tenant_id == "7"  # the resolver's answer, as text
    unscoped = noop.using(enqueued_by="bare").enqueue(key="b")  # the resolver answers None
    assert Job.objects.get(id=unscoped.id).tenant_id is None
    agreed = noop.using(enqueued_by="ann@acme", tenant_id="acme").enqueue(key="a")
    assert Job.objects.get(id=agreed.id).tenant_id == "acme"
    with refused("X_JOB_TENANT_MISMATCH") as caught:
        noop.using(enqueued_by="ann@acme", tenant_id="globex").enqueue(key="m")
    assert caught.error.cause == "tests.noop: tenant_id='globex' differs from the enqueuer's tenant 'acme'."
    with refused("X_CONFIG_INVALID") as broken:
        noop.using(enqueued_by="broken").enqueue(key="x")
    assert broken.error.cause == (f"ULTIMATE_JOBS['TENANT_OF']='{__name__}.tenant_of' answered ['acme'], which is "
                                  "not a tenant id.")


MISMATCH = "tests.tenant_noop: the enqueue names tenant 'globex' but the input belongs to 'acme'."


@TENANT_OF
def test_a_tenant_named_by_the_call_must_be_the_inputs() -> None:
    with refused("X_JOB_TENANT_MISMATCH") as explicit:
        tenant_noop.using(tenant_id="globex").enqueue(key="x", org="acme")
    assert explicit.error.cause == MISMATCH
    with refused("X_JOB_TENANT_MISMATCH") as enqueuer:
        tenant_noop.using(enqueued_by="bob@globex").enqueue(key="y", org="acme")
    assert enqueuer.error.cause == MISMATCH
    ok = tenant_noop.using(enqueued_by="bare").enqueue(key="z", org="acme")  # no enqueuer tenant: the input's
    assert Job.objects.get(id=ok.id).tenant_id == "acme"


def test_call_options_override_the_declaration_and_the_rest_is_kept() -> None:
    plain = Job.objects.get(id=noop.enqueue(key="plain").id)
    assert (plain.queue, plain.priority, plain.max_attempts, plain.idempotency_key) == ("default", 0, 3, "plain")
    moved = Job.objects.get(id=noop.using(queue="bulk", priority=7).enqueue(key="moved").id)
    assert (moved.queue, moved.priority) == ("bulk", 7)


def rendered(key: str = "k") -> JobInput:
    return JobInput(name="tests.noop", queue="default", priority=0, max_attempts=3, payload='{"key": "k"}',
                    idempotency_key=key, tenant_id=None, concurrency_key=None)


def test_a_key_prefix_counts_against_the_key_limit() -> None:
    options = EnqueueOptions(key_prefix="tick:1700000000000:")
    assert options.row(rendered("k" * 981)).idempotency_key == "tick:1700000000000:" + "k" * 981  # 1,000 exactly
    with pytest.raises(Exception) as caught:
        options.row(rendered("k" * 982))
    err = caught.value
    assert (err.code, err.cause, err.fix) == (  # type: ignore[attr-defined]
        "X_JOB_INPUT_INVALID",
        "tests.noop: the idempotency key with its prefix 'tick:1700000000000:' is over 1000 characters.",
        "Key jobs by ids, and keep task names short.")
    assert EnqueueOptions().row(rendered("k" * 5000)).idempotency_key == "k" * 5000  # no prefix: not checked here


def test_duplicates_in_one_call_share_one_job_inserted_or_staged() -> None:
    inserted = noop.enqueue_many([{"key": "a"}, {"key": "b"}, {"key": "a"}])
    assert [(r.deduped, r.staged) for r in inserted] == [(False, False), (False, False), (True, False)]
    assert inserted[2].id == inserted[0].id and inserted[2].run_id == inserted[0].run_id
    assert Job.objects.filter(name="tests.noop").count() == 2
    with transaction.atomic():
        staged = noop.enqueue_many([{"key": "c"}, {"key": "c"}, {"key": "d"}])
        assert OutboxEntry.objects.count() == 2
    assert [(r.deduped, r.staged) for r in staged] == [(None, True), (None, True), (None, True)]
    assert staged[1].id == staged[0].id and staged[1].run_id == staged[0].run_id and staged[2].id != staged[0].id


@override_settings(ULTIMATE_JOBS={"OUTBOX": "required"})
def test_outbox_required_refuses_autocommit_naming_the_job_and_database() -> None:
    with refused("X_OUTBOX_NO_TX") as caught:
        noop.enqueue(key="autocommit")
    assert caught.error.cause == ("tests.noop: enqueue outside a transaction on database 'default' while "
                                  "ULTIMATE_JOBS['OUTBOX'] is \"required\".")
    with transaction.atomic():
        assert noop.enqueue(key="inside").staged is True


def test_a_delayed_enqueue_waits_its_delay() -> None:
    row = Job.objects.get(id=noop.using(delay=timedelta(minutes=5)).enqueue(key="later").id)
    assert (row.state, row.run_at - row.created_at) == ("delayed", timedelta(minutes=5))
    assert NO_TENANT is not None


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


def test_the_relays_direct_write_inserts_even_inside_a_transaction() -> None:
    from ultimate_jobs.enqueue import submit

    row = EnqueueOptions().row(rendered("direct"))
    with transaction.atomic():
        (result,) = submit([row], direct=True)
        assert (result.staged, result.deduped) == (False, False)
        assert Job.objects.filter(idempotency_key="direct").count() == 1
    assert OutboxEntry.objects.count() == 0


def test_run_at_run_id_and_the_concurrency_key_reach_the_row(frozen_clock) -> None:
    from tests.app.jobs import fleet_keyed_fail

    when = frozen_clock.now() + timedelta(hours=2)
    row = Job.objects.get(id=noop.using(run_at=when).enqueue(key="at").id)
    assert (row.state, row.run_at) == ("delayed", when)
    keyed = Job.objects.get(id=fleet_keyed_fail.enqueue(key="c", account="acct-7").id)
    assert keyed.concurrency_key == "tests.fleet.keyed_fail:acct-7"  # the name prefixes the rendered key
    with refused("X_ID_INVALID") as caught:
        noop.using(run_id="not-a-uuid").enqueue(key="bad-run")
    assert caught.error.cause == "run_id='not-a-uuid' is not a lowercase UUID."


def test_a_staged_row_carries_the_frozen_clock(frozen_clock) -> None:
    with transaction.atomic():
        noop.enqueue(key="staged-now")
    assert OutboxEntry.objects.get().staged_at == frozen_clock.now()
