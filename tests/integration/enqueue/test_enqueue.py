"""Enqueue and dedupe, on PostgreSQL and on SQLite: the live key, batches, the tenant a job is stored
under (named by the call, the input or the enqueuer's TENANT_OF), the per-call options of ``using()``
and what of them reaches the row, each refusal with nothing written."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test import override_settings

from tests.app.jobs import noop, tenant_noop
from tests.error_codes import refused
from ultimate_jobs import MAX_ENQUEUE_BATCH, NO_TENANT, JobsError, ops
from ultimate_jobs.enqueue import EnqueueOptions, JobInput
from ultimate_jobs.models import Job, OutboxEntry

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_live_duplicate_answers_the_first_job_and_first_payload_wins(declare) -> None:
    @declare(idempotency_key="{key}", tenant=NO_TENANT)
    def keyed(ctx, *, key: str, note: str) -> None: ...

    first = keyed.enqueue(key="a", note="first")
    second = keyed.enqueue(key="a", note="second")
    assert (first.deduped, first.staged) == (False, False)
    assert second.deduped is True and second.id == first.id and second.run_id == first.run_id
    assert Job.objects.count() == 1
    assert ops.get_job(first.id)["payload"] == {"key": "a", "note": "first"}


def test_names_and_tenants_never_dedupe_into_each_other(declare) -> None:
    @declare(name="store.other_noop", idempotency_key="{key}", tenant=NO_TENANT)
    def other(ctx, *, key: str) -> None: ...

    a = noop.enqueue(key="shared")
    b = other.enqueue(key="shared")
    c = tenant_noop.enqueue(key="shared", org="acme")
    d = tenant_noop.enqueue(key="shared", org="globex")
    e = tenant_noop.enqueue(key="shared", org="acme")
    assert len({a.id, b.id, c.id, d.id}) == 4
    assert e.deduped and e.id == c.id
    assert Job.objects.get(id=d.id).tenant_id == "globex"


def test_no_tenant_jobs_store_null_unless_an_explicit_tenant_is_given() -> None:
    plain = noop.enqueue(key="t1")
    scoped = noop.using(tenant_id="acme").enqueue(key="t1")
    assert Job.objects.get(id=plain.id).tenant_id is None
    assert Job.objects.get(id=scoped.id).tenant_id == "acme"
    assert scoped.id != plain.id  # two orgs enqueueing one key get two jobs


def test_an_explicit_tenant_must_match_the_inputs_tenant() -> None:
    with pytest.raises(JobsError) as err:
        tenant_noop.using(tenant_id="globex").enqueue(key="x", org="acme")
    assert err.value.code == "X_JOB_TENANT_MISMATCH"
    assert Job.objects.count() == 0


def _tenant_of(user: object) -> str:
    return str(user).split("@")[1]


@override_settings(ULTIMATE_JOBS={"TENANT_OF": "tests.integration.enqueue.test_enqueue._tenant_of"})
def test_the_enqueuers_tenant_is_compared_and_recorded() -> None:
    ok = tenant_noop.using(enqueued_by="ann@acme").enqueue(key="y", org="acme")
    row = Job.objects.get(id=ok.id)
    assert (row.tenant_id, row.enqueued_by) == ("acme", "ann@acme")
    with pytest.raises(JobsError) as err:
        tenant_noop.using(enqueued_by="bob@globex").enqueue(key="z", org="acme")
    assert err.value.code == "X_JOB_TENANT_MISMATCH"


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


def test_a_key_is_free_again_once_its_job_is_terminal() -> None:
    first = noop.enqueue(key="again")
    Job.objects.filter(id=first.id).update(state="done")
    second = noop.enqueue(key="again")
    assert second.deduped is False and second.id != first.id
    assert Job.objects.filter(idempotency_key="again").count() == 2


def test_enqueue_many_answers_in_input_order_and_dedupes_inside_the_batch() -> None:
    existing = noop.enqueue(key="m0")
    results = noop.enqueue_many([{"key": "m1"}, {"key": "m0"}, {"key": "m2"}, {"key": "m1"}])
    assert [r.deduped for r in results] == [False, True, False, True]
    assert results[1].id == existing.id and results[3].id == results[0].id
    assert Job.objects.count() == 3
    stored = {j.idempotency_key: j.id for j in Job.objects.all()}
    assert [r.id for r in results] == [stored["m1"], stored["m0"], stored["m2"], stored["m1"]]


def test_enqueue_many_over_the_limit_writes_nothing() -> None:
    with pytest.raises(JobsError) as err:
        noop.enqueue_many([{"key": f"k{i}"} for i in range(MAX_ENQUEUE_BATCH + 1)])
    assert err.value.code == "X_JOB_ENQUEUE_BATCH_TOO_LARGE"
    assert Job.objects.count() == 0


def test_one_bad_input_refuses_the_whole_batch() -> None:
    inputs = [{"key": f"k{i}"} for i in range(1500)] + [{"key": "bad\x00"}]
    with pytest.raises(JobsError) as err:
        noop.enqueue_many(inputs)
    assert err.value.code == "X_JOB_INPUT_INVALID"
    assert "#1500" in err.value.cause
    assert Job.objects.count() == 0


def test_enqueue_many_of_thousands_spans_statements_and_keeps_every_row() -> None:
    results = noop.enqueue_many([{"key": f"big{i}"} for i in range(2500)])
    assert len({r.id for r in results}) == 2500
    assert Job.objects.count() == 2500


def test_enqueue_many_inside_a_transaction_vanishes_whole_on_rollback() -> None:
    from ultimate_jobs.models import OutboxEntry
    from ultimate_jobs.outbox import Relay

    with pytest.raises(RuntimeError), transaction.atomic():
        staged = noop.enqueue_many([{"key": "r1"}, {"key": "r2"}])
        assert [(r.staged, r.deduped) for r in staged] == [(True, None), (True, None)]
        raise RuntimeError("roll back")
    assert Relay(relay_id="r").run_once() == 0  # nothing was staged, so nothing is ever published
    assert Job.objects.count() == 0 and OutboxEntry.objects.count() == 0


@pytest.mark.parametrize("bad", [
    {"key": "a\x00b"},                                   # NUL: jsonb cannot store it
    {"key": "x" * (1 << 20)},                            # over MAX_PAYLOAD_BYTES
    {"key": "ok", "extra": 1},                           # not in the signature
    {},                                                  # missing argument
    {"key": {1, 2}},                                     # not JSON
])
def test_bad_input_is_refused_before_any_sql(bad: dict) -> None:
    with pytest.raises(JobsError) as err:
        noop.enqueue(**bad)
    assert err.value.code == "X_JOB_INPUT_INVALID"
    assert Job.objects.count() == 0


@pytest.mark.parametrize("queue", ['a"; DROP TABLE ultimate_jobs_job; --', "has space", "q" * 65, "UPPER"])
def test_bad_queue_names_at_enqueue_are_refused_and_the_table_is_intact(queue: str) -> None:
    with pytest.raises(JobsError) as err:
        noop.using(queue=queue).enqueue(key="q")
    assert err.value.code == "X_QUEUE_INVALID"
    assert Job.objects.count() == 0
    noop.enqueue(key="still-works")
    assert Job.objects.count() == 1


def test_an_empty_key_is_refused_with_nothing_written(declare) -> None:
    @declare(idempotency_key=lambda key: key, tenant=NO_TENANT)
    def keyed(ctx, *, key: str) -> None: ...

    with pytest.raises(JobsError) as err:
        keyed.enqueue(key="")
    assert err.value.code == "X_INVARIANT"
    assert Job.objects.count() == 0


def test_using_sets_delay_priority_queue_and_run_id() -> None:
    from uuid import UUID

    run_id = "01234567-89ab-7def-8123-456789abcdef"
    r = noop.using(delay="1h", priority=-5, queue="bulk", run_id=run_id).enqueue(key="u")
    row = Job.objects.get(id=r.id)
    assert (row.state, row.priority, row.queue, row.run_id) == ("delayed", -5, "bulk", UUID(run_id))
    assert row.run_at - row.created_at == timedelta(hours=1)
    with pytest.raises(JobsError) as err:
        noop.using(run_id="01234567-89AB-7DEF-8123-456789ABCDEF").enqueue(key="v")
    assert err.value.code == "X_ID_INVALID"


def test_a_zero_delay_and_a_200_character_tenant_are_accepted() -> None:
    row = Job.objects.get(id=noop.using(delay=0, tenant_id="t" * 200).enqueue(key="edge").id)
    assert (row.state, row.tenant_id) == ("ready", "t" * 200)


def test_a_delayed_enqueue_waits_its_delay() -> None:
    row = Job.objects.get(id=noop.using(delay=timedelta(minutes=5)).enqueue(key="later").id)
    assert (row.state, row.run_at - row.created_at) == ("delayed", timedelta(minutes=5))
    assert NO_TENANT is not None


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


def test_the_relays_direct_write_inserts_even_inside_a_transaction() -> None:
    from ultimate_jobs.enqueue import submit

    row = EnqueueOptions().row(rendered("direct"))
    with transaction.atomic():
        (result,) = submit([row], direct=True)
        assert (result.staged, result.deduped) == (False, False)
        assert Job.objects.filter(idempotency_key="direct").count() == 1
    assert OutboxEntry.objects.count() == 0


def test_eight_threads_enqueueing_the_same_keys_leave_one_live_row_per_key() -> None:
    keys = [f"race{i}" for i in range(200)]
    answers: list[dict[str, object]] = [{} for _ in range(8)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def enqueue(slot: int) -> None:
        try:
            barrier.wait()
            for key in (keys if slot % 2 == 0 else list(reversed(keys))):
                answers[slot][key] = noop.enqueue(key=key).id
        except BaseException as exc:  # noqa: BLE001 - collected and re-raised in the test thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=enqueue, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert Job.objects.count() == 200
    for key in keys:
        assert len({answers[n][key] for n in range(8)}) == 1
