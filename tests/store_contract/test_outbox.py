"""The outbox methods: stage, claim (a lease, in staging order), mark published, release, purge."""

from __future__ import annotations

from tests.store_contract import covers
from tests.store_contract.plant import NOW, job_row, later
from ultimate_jobs.db.store import Store
from ultimate_jobs.ids import uuid7
from ultimate_jobs.models import OutboxEntry


def _stage(store: Store, *keys: str) -> list:  # type: ignore[type-arg]
    rows = [job_row(key=k) for k in keys]
    store.outbox_stage_many(rows=rows, now=NOW)
    return rows


@covers("outbox_stage_many", "outbox_claim", "outbox_mark_published")
def test_a_claim_is_a_lease_and_only_its_relay_marks_the_rows_published(store: Store) -> None:
    first, second = _stage(store, "a", "b")
    assert OutboxEntry.objects.using(store.alias).filter(published_at=None).count() == 2
    batch = store.outbox_claim(relay_id="r1", limit=10, lease=30, now=NOW)
    assert [r.id for r in batch] == [first.id, second.id]  # staging order
    assert (batch[0].run_id, batch[0].name, batch[0].payload, batch[0].run_at, batch[0].delay) == (
        first.run_id, first.name, first.payload, NOW, 0.0)
    assert store.outbox_claim(relay_id="r2", limit=10, lease=30, now=later(10)) == []  # held

    live_job = uuid7()
    pairs = [(first.id, first.id), (second.id, live_job)]
    assert store.outbox_mark_published(published=pairs, relay_id="r2", now=later(1)) == set()  # not r2's
    assert store.outbox_mark_published(published=pairs, relay_id="r1", now=later(1)) == {first.id, second.id}
    assert store.outbox_mark_published(published=pairs, relay_id="r1", now=later(2)) == set()  # first writer won
    entries = {e.id: e for e in OutboxEntry.objects.using(store.alias).all()}
    assert (entries[first.id].job_id, entries[second.id].job_id) == (first.id, live_job)
    assert entries[first.id].published_at == later(1)


@covers("outbox_claim")
def test_rows_never_overtake_an_earlier_held_row_of_their_transaction(store: Store) -> None:
    first, second = _stage(store, "a", "b")
    assert [r.id for r in store.outbox_claim(relay_id="r1", limit=1, lease=30, now=NOW)] == [first.id]
    assert store.outbox_claim(relay_id="r2", limit=10, lease=30, now=NOW) == []
    lapsed = store.outbox_claim(relay_id="r2", limit=10, lease=30, now=later(31))  # r1's lease lapsed
    assert [r.id for r in lapsed] == [first.id, second.id]


@covers("outbox_release")
def test_a_release_hands_back_only_the_releasing_relays_rows(store: Store) -> None:
    (row,) = _stage(store, "a")
    store.outbox_claim(relay_id="r1", limit=10, lease=30, now=NOW)
    assert store.outbox_release(ids=[row.id], relay_id="r2") == set()
    assert store.outbox_release(ids=[row.id], relay_id="r1") == {row.id}
    assert [r.id for r in store.outbox_claim(relay_id="r2", limit=10, lease=30, now=later(1))] == [row.id]
    assert store.outbox_release(ids=[], relay_id="r2") == set()


@covers("outbox_purge")
def test_a_purge_deletes_rows_published_past_retention(store: Store) -> None:
    published, pending = _stage(store, "a", "b")
    store.outbox_claim(relay_id="r1", limit=1, lease=30, now=NOW)
    store.outbox_mark_published(published=[(published.id, published.id)], relay_id="r1", now=NOW)
    assert store.outbox_purge(retention=60, now=later(30)) == 0
    assert store.outbox_purge(retention=60, now=later(61)) == 1
    assert list(OutboxEntry.objects.using(store.alias).values_list("id", flat=True)) == [pending.id]
