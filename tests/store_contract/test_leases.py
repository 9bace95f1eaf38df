"""The lease methods: fleet concurrency slots and the scheduler's leader lease."""

from __future__ import annotations

from tests.store_contract import covers
from tests.store_contract.plant import NOW, later
from ultimate_jobs.db.store import LeaderLease, Store
from ultimate_jobs.ids import uuid7
from ultimate_jobs.models import FleetSlot


@covers("slot_acquire", "slot_renew", "slot_release")
def test_slots_are_taken_renewed_while_held_and_taken_over_once_expired(store: Store) -> None:
    a, b, c = uuid7(), uuid7(), uuid7()

    def acquire(job_id, now=NOW):  # type: ignore[no-untyped-def]
        return store.slot_acquire(key="k", limit=2, job_id=job_id, holder="h1", ttl=30, now=now)

    assert (acquire(a), acquire(b), acquire(c)) == (0, 1, None)
    assert acquire(a) == 0  # a run's own leftover slot is its own
    assert store.slot_renew(held=[("k", 0, a), ("k", 1, b)], holder="h1", ttl=30, now=later(20)) == {a, b}
    assert store.slot_renew(held=[("k", 0, a)], holder="h2", ttl=30, now=later(20)) == set()
    assert acquire(c, now=later(40)) is None  # renewed until later(50)
    assert store.slot_renew(held=[("k", 1, b)], holder="h1", ttl=30, now=later(51)) == set()  # expired: lost
    assert acquire(c, now=later(51)) == 0  # expired slots go to the next job

    store.slot_release(key="k", slot=0, job_id=c, holder="h-other")  # not its slot: untouched
    assert FleetSlot.objects.using(store.alias).filter(concurrency_key="k", slot=0, job_id=c).exists()
    store.slot_release(key="k", slot=0, job_id=c, holder="h1")
    assert not FleetSlot.objects.using(store.alias).filter(concurrency_key="k", slot=0).exists()


@covers("leader_attempt_elect", "leader_resign")
def test_one_leader_at_a_time_until_it_resigns_or_lapses(store: Store) -> None:
    def elect(holder: str, now=NOW) -> LeaderLease:  # type: ignore[no-untyped-def]
        return store.leader_attempt_elect(name="scheduler", holder=holder, ttl=30, now=now)

    first = elect("h1")
    assert (first.leading, first.holder, first.expires_at, first.now) == (True, "h1", later(30), NOW)
    refused = elect("h2", now=later(10))
    assert (refused.leading, refused.holder, refused.expires_at) == (False, "h1", later(30))
    assert elect("h1", now=later(20)).expires_at == later(50)  # renewed
    assert store.leader_resign(name="scheduler", holder="h2", now=later(21)) is False
    assert store.leader_resign(name="scheduler", holder="h1", now=later(21)) is True
    assert store.leader_resign(name="scheduler", holder="h1", now=later(22)) is False  # nothing left to resign
    assert elect("h2", now=later(22)).leading is True
    assert elect("h1", now=later(53)).leading is True  # h2's lease lapsed at later(52)
