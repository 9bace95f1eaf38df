"""The transactional outbox: staging inside transaction.atomic() and the relay that publishes it.

Conformance: every test here runs on PostgreSQL and on SQLite (one writer) unless marked.
The relays here run in-process on a frozen clock; tests/process/test_outbox_relay.py races and
kills real relay processes.
"""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.db import transaction
from django.test import override_settings

from tests.app.jobs import noop
from tests.error_codes import refused
from tests.support.sessions import second_session
from ultimate_jobs import JobsError, ops
from ultimate_jobs.db import store_for
from ultimate_jobs.models import Job, OutboxEntry
from ultimate_jobs.outbox import Relay

pytestmark = pytest.mark.django_db(transaction=True)


def stage(keys: list[str]) -> list:  # type: ignore[type-arg]
    """Stage one noop per key in one committed transaction; answer the results."""
    with transaction.atomic():
        return noop.enqueue_many([{"key": k} for k in keys])


def staged_order() -> list:  # type: ignore[type-arg]
    return list(OutboxEntry.objects.order_by("staged_at", "id").values_list("id", flat=True))


class MarkSpy:
    """The relay's store, recording the rows each mark statement covered, in order."""

    def __init__(self, store: object) -> None:
        self.store = store
        self.marked: list = []  # type: ignore[type-arg]

    def __getattr__(self, name: str) -> object:
        return getattr(self.store, name)

    def outbox_mark_published(self, **kwargs):
        answer = self.store.outbox_mark_published(**kwargs)  # type: ignore[attr-defined]
        self.marked.extend(outbox_id for outbox_id, _ in kwargs["published"])
        return answer


def record_marks(relay: Relay) -> list:  # type: ignore[type-arg]
    """Wrap the relay's store so a test sees the rows each pass marked published, in order."""
    spy = MarkSpy(relay.store)
    relay.store = spy  # type: ignore[assignment]
    return spy.marked


# -- staging ------------------------------------------------------------------------------------


def test_a_rollback_leaves_no_job_and_no_outbox_row_ever() -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        result = noop.enqueue(key="rolled-back")
        assert result.staged is True
        raise RuntimeError("roll back")
    assert Relay(relay_id="r").run_once() == 0
    assert (Job.objects.count(), OutboxEntry.objects.count()) == (0, 0)
    with pytest.raises(JobsError) as err:
        ops.get_job(result.id)
    assert err.value.code == "X_JOB_NOT_FOUND"


def test_a_commit_stages_then_the_job_runs_once_under_the_staged_ids(make_worker) -> None:
    with transaction.atomic():
        result = noop.enqueue(key="committed")
        assert Job.objects.count() == 0  # staged, not inserted: the worker cannot see it before commit
    assert (result.staged, result.deduped) == (True, None)
    staged = ops.get_job(result.id)
    assert (staged["state"], staged["id"], staged["run_id"]) == ("staged", str(result.id), str(result.run_id))
    assert (staged["payload"], staged["attempt"], staged["steps"]) == ({"key": "committed"}, 0, [])

    assert Relay(relay_id="r").run_once() == 1
    job = Job.objects.get()
    assert (job.id, job.run_id, job.state) == (result.id, result.run_id, "ready")
    entry = OutboxEntry.objects.get()
    assert entry.job_id == result.id and entry.published_at is not None and entry.claimed_by == "r"
    stats = make_worker(queues=["default"], burst=True).run(install_signals=False)
    assert stats["settled"] == 1
    done = ops.get_job(result.id)
    assert (done["state"], done["attempt"], done["result"]) == ("done", 1, {"key": "committed", "attempt": 1})


def test_staging_happens_on_the_callers_connection_and_is_invisible_until_commit() -> None:
    """A second connection sees nothing while the transaction is open: the row is in it."""
    import threading

    seen: list[int] = []

    def look() -> None:
        from django.db import connection

        seen.append(OutboxEntry.objects.count())
        connection.close()

    with transaction.atomic():
        noop.enqueue(key="invisible")
        other = threading.Thread(target=look)
        other.start()
        other.join()
        assert OutboxEntry.objects.count() == 1  # the caller's own transaction sees its row
    assert seen == [0]
    assert OutboxEntry.objects.count() == 1


@override_settings(ULTIMATE_JOBS={"OUTBOX": "required"})
def test_outbox_required_refuses_an_autocommit_enqueue_and_writes_nothing() -> None:
    for call in (lambda: noop.enqueue(key="autocommit"), lambda: noop.enqueue_many([{"key": "a"}, {"key": "b"}])):
        with pytest.raises(JobsError) as err:
            call()
        assert err.value.code == "X_OUTBOX_NO_TX"
        assert "transaction.atomic()" in str(err.value)
    assert (Job.objects.count(), OutboxEntry.objects.count()) == (0, 0)
    with transaction.atomic():
        assert noop.enqueue(key="in-a-transaction").staged is True
    assert OutboxEntry.objects.count() == 1


@override_settings(ULTIMATE_JOBS={"OUTBOX": "required"})
def test_outbox_required_refuses_autocommit_naming_the_job_and_database() -> None:
    with refused("X_OUTBOX_NO_TX") as caught:
        noop.enqueue(key="autocommit")
    assert caught.error.cause == ("tests.noop: enqueue outside a transaction on database 'default' while "
                                  "ULTIMATE_JOBS['OUTBOX'] is \"required\".")
    with transaction.atomic():
        assert noop.enqueue(key="inside").staged is True


def test_enqueue_many_stages_one_statement_per_thousand_and_folds_shared_keys(monkeypatch) -> None:
    store = store_for()
    calls: list[int] = []
    stage_many = store.outbox_stage_many

    def counting(**kwargs):
        calls.append(len(kwargs["rows"]))
        return stage_many(**kwargs)

    monkeypatch.setattr(store, "outbox_stage_many", counting)
    inputs = [{"key": f"k{i}"} for i in range(2500)] + [{"key": "k7"}]
    with transaction.atomic():
        results = noop.enqueue_many(inputs)
    assert calls == [1000, 1000, 500]
    assert all(r.staged and r.deduped is None for r in results)
    assert results[-1].id == results[7].id and results[-1].run_id == results[7].run_id
    assert OutboxEntry.objects.count() == 2500
    assert staged_order() == [r.id for r in results[:2500]]  # the answers' order is the staging order


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


def test_a_staged_row_that_dedupes_into_a_live_job_records_it_and_get_job_follows() -> None:
    live = noop.enqueue(key="shared")
    with transaction.atomic():
        staged = noop.enqueue(key="shared")
    assert staged.id != live.id and staged.deduped is None
    Relay(relay_id="r").run_once()
    assert Job.objects.count() == 1
    assert OutboxEntry.objects.get().job_id == live.id
    followed = ops.get_job(staged.id)
    assert (followed["id"], followed["staged_id"]) == (str(live.id), str(staged.id))
    assert ops.get_job(live.id)["staged_id"] is None


def test_a_delay_counts_from_the_enqueue_not_from_the_publish(frozen_clock) -> None:
    staged_at = frozen_clock.now()
    with transaction.atomic():
        result = noop.using(delay="60s").enqueue(key="later")
    frozen_clock.advance(timedelta(seconds=20))
    Relay(relay_id="r").run_once()
    job = Job.objects.get(id=result.id)
    assert job.state == "delayed" and job.run_at == staged_at + timedelta(seconds=60)


# -- the relay: order, lease, fencing -------------------------------------------------------------


def test_a_staged_row_carries_the_frozen_clock(frozen_clock) -> None:
    with transaction.atomic():
        noop.enqueue(key="staged-now")
    assert OutboxEntry.objects.get().staged_at == frozen_clock.now()


def test_rows_of_one_transaction_publish_in_staging_order_across_passes() -> None:
    results = stage([f"o{i}" for i in range(23)])
    relay = Relay(relay_id="r", batch_size=5)
    marks = record_marks(relay)
    assert relay.drain() == 23
    assert marks == [r.id for r in results]
    assert relay.stats["passes"] == 6  # five batches, then one pass that claims nothing


def test_a_claim_is_a_lease_no_other_relay_takes_inside_it(frozen_clock) -> None:
    stage([f"l{i}" for i in range(4)])
    store = store_for()
    held = store.outbox_claim(relay_id="a", limit=2, lease=30, now=frozen_clock.now())
    assert len(held) == 2
    # Inside the lease: B may not take A's rows, nor the later rows of the same transaction.
    assert store.outbox_claim(relay_id="b", limit=10, lease=30, now=frozen_clock.now()) == []
    frozen_clock.advance(timedelta(seconds=31))
    taken = store.outbox_claim(relay_id="b", limit=10, lease=30, now=frozen_clock.now())
    assert [r.id for r in taken] == staged_order()  # A's lapsed rows first, then the rest, in order


def test_a_stalled_relays_late_mark_and_release_are_no_ops(frozen_clock, caplog) -> None:
    results = stage(["s1", "s2", "s3"])
    store = store_for()
    stalled = Relay(relay_id="stalled", lease=30)
    batch = store.outbox_claim(relay_id="stalled", limit=10, lease=30, now=frozen_clock.now())
    frozen_clock.advance(timedelta(seconds=31))  # the stalled relay's lease lapses
    fresh = store.outbox_claim(relay_id="fresh", limit=10, lease=30, now=frozen_clock.now())
    assert [r.id for r in fresh] == [r.id for r in batch]

    ids = [r.id for r in batch]
    assert store.outbox_release(ids=ids, relay_id="stalled") == set()
    assert store.outbox_mark_published(published=[(i, i) for i in ids], relay_id="stalled", now=None) == set()
    assert set(OutboxEntry.objects.values_list("claimed_by", flat=True)) == {"fresh"}
    assert not OutboxEntry.objects.filter(published_at__isnull=False).exists()

    # Its whole publish: the jobs are inserted, the fenced mark comes up short, all rolls back.
    with caplog.at_level(logging.WARNING, logger="ultimate_jobs"):
        assert stalled._publish(batch) == 0
    assert "jobs.outbox.lease-lost" in caplog.text
    assert Job.objects.count() == 0

    # The relay that holds them publishes them, once.
    assert Relay(relay_id="fresh")._publish(fresh) == 3
    assert sorted(Job.objects.values_list("id", flat=True)) == sorted(r.id for r in results)


def test_a_dead_relays_rows_are_reclaimed_after_the_lease(frozen_clock) -> None:
    stage(["d1", "d2"])
    store_for().outbox_claim(relay_id="dead", limit=10, lease=30, now=frozen_clock.now())
    relay = Relay(relay_id="alive", lease=30)
    assert relay.run_once() == 0
    frozen_clock.advance(timedelta(seconds=30))
    assert relay.run_once() == 2
    assert Job.objects.count() == 2


def test_a_poison_row_stops_its_batch_and_the_rest_is_released_and_retried(frozen_clock, caplog) -> None:
    results = stage([f"p{i}" for i in range(10)])
    poison = results[4].id
    OutboxEntry.objects.filter(id=poison).update(payload="{not json")
    relay = Relay(relay_id="r", lease=30)
    marks = record_marks(relay)
    with caplog.at_level(logging.WARNING, logger="ultimate_jobs"):
        assert relay.run_once() == 4
    failed = [r for r in caplog.records if r.getMessage().startswith("jobs.outbox.publish-failed")]
    assert len(failed) == 1 and str(poison) in failed[0].getMessage()
    assert marks == [r.id for r in results[:4]]
    rows = {e.id: e for e in OutboxEntry.objects.all()}
    assert rows[poison].claimed_by == "r" and rows[poison].published_at is None  # held: retried after the lease
    assert all(rows[r.id].claimed_by is None for r in results[5:])  # released
    assert relay.stats["failed"] == 1

    # The rows staged after it wait behind it: the order guarantee.
    assert relay.run_once() == 0 and relay.claimed_last == 0
    OutboxEntry.objects.filter(id=poison).update(payload='{"key": "p4"}')
    frozen_clock.advance(timedelta(seconds=31))
    assert relay.drain() == 6
    assert marks == [r.id for r in results]
    assert Job.objects.count() == 10


def test_published_rows_are_deleted_after_the_retention_and_unpublished_ones_never(frozen_clock) -> None:
    stage(["old"])
    Relay(relay_id="r").run_once()
    stage(["waiting"])
    store = store_for()
    frozen_clock.advance(timedelta(hours=23))
    assert store.outbox_purge(retention=86400, now=frozen_clock.now()) == 0
    frozen_clock.advance(timedelta(hours=2))
    assert store.outbox_purge(retention=86400, now=frozen_clock.now()) == 1
    assert list(OutboxEntry.objects.values_list("idempotency_key", flat=True)) == ["waiting"]


@override_settings(ULTIMATE_JOBS={"OUTBOX_RETENTION": "1h"})
def test_the_relay_sweeps_published_rows_past_the_retention(frozen_clock) -> None:
    stage(["swept"])
    Relay(relay_id="r").run_once()
    frozen_clock.advance(timedelta(hours=2))
    assert OutboxEntry.objects.count() == 1
    Relay(relay_id="r").run_once()  # a new relay sweeps on its first pass, then once a minute
    assert OutboxEntry.objects.count() == 0
    assert Job.objects.count() == 1


def test_the_relays_lease_and_batch_size_are_validated() -> None:
    for bad in ({"lease": 0}, {"lease": float("inf")}, {"lease": "-1s"}, {"batch_size": 0}, {"batch_size": True}):
        with pytest.raises(JobsError) as err:
            Relay(**bad)
        assert err.value.code == "X_CONFIG_INVALID"
    for setting in ({"CLAIM_LEASE": 0}, {"CLAIM_LEASE": float("inf")}, {"RELAY_BATCH_SIZE": 0}):
        with override_settings(ULTIMATE_JOBS=setting), pytest.raises(JobsError) as err:
            Relay()
        assert err.value.code == "X_CONFIG_INVALID" and next(iter(setting)) in err.value.cause


# -- PostgreSQL: transaction groups, the wake ---------------------------------------------------------


@pytest.mark.postgres_only
def test_a_held_transaction_holds_back_only_its_own_rows(frozen_clock) -> None:
    first = stage([f"t1-{i}" for i in range(4)])
    second = stage([f"t2-{i}" for i in range(2)])
    store = store_for()
    a = store.outbox_claim(relay_id="a", limit=2, lease=30, now=frozen_clock.now())
    assert [r.id for r in a] == [r.id for r in first[:2]]
    b = store.outbox_claim(relay_id="b", limit=10, lease=30, now=frozen_clock.now())
    assert [r.id for r in b] == [r.id for r in second]  # the other transaction's rows, not first[2:]


@pytest.mark.postgres_only
def test_a_staged_row_wakes_relays_at_commit_and_never_on_rollback() -> None:
    with second_session(autocommit=True) as listener:
        listener.execute("LISTEN ultimate_jobs_outbox")
        with pytest.raises(RuntimeError), transaction.atomic():
            noop.using(queue="wake-a").enqueue(key="no")
            raise RuntimeError("roll back")
        with transaction.atomic():
            noop.using(queue="wake-b").enqueue(key="yes")
            assert list(listener.notifies(timeout=0.2, stop_after=1)) == []  # not before commit
        notes = list(listener.notifies(timeout=2, stop_after=1))
    assert [(n.channel, n.payload) for n in notes] == [("ultimate_jobs_outbox", "wake-b")]


@pytest.mark.postgres_only
def test_a_claim_never_takes_rows_behind_a_concurrent_uncommitted_claim(frozen_clock) -> None:
    """SKIP LOCKED passes over the rows another claim is locking without a trace; the claim must
    still not take the rows staged after them in the same transaction."""
    from ultimate_jobs.db.postgres import OUTBOX_CLAIM

    staged = [r.id for r in stage([f"c{i}" for i in range(6)])]
    with second_session() as other:  # a transaction: its claim's locks last until commit
        got = other.execute(OUTBOX_CLAIM, {"relay_id": "a", "limit": 2, "lease": 30, "now": frozen_clock.now()},
                            prepare=False).fetchall()
        assert [row[0] for row in got] == staged[:2]
        assert store_for().outbox_claim(relay_id="b", limit=10, lease=30, now=frozen_clock.now()) == []
        other.commit()
    assert store_for().outbox_claim(relay_id="b", limit=10, lease=30, now=frozen_clock.now()) == []  # held
    frozen_clock.advance(timedelta(seconds=31))
    assert [r.id for r in store_for().outbox_claim(relay_id="b", limit=10, lease=30,
                                                   now=frozen_clock.now())] == staged
