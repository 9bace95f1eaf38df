"""The outcome counter methods: add events, fold minute buckets into coarser tiers."""

from __future__ import annotations

from collections import Counter

from tests.store_contract import covers
from tests.store_contract.plant import NOW, later
from ultimate_jobs.db.store import Store
from ultimate_jobs.models import JobCounter


def _counts(store: Store) -> Counter[tuple[str, int]]:
    tally: Counter[tuple[str, int]] = Counter()
    for row in JobCounter.objects.using(store.alias).all():
        tally[(row.outcome, row.width)] += row.count
    return tally


@covers("counter_add", "counter_fold")
def test_events_count_in_the_minute_and_all_time_rows_and_fold_into_the_tiers(store: Store) -> None:
    store.counter_add(events=[("j", "q", "done"), ("j", "q", "done"), ("j", "q", "failed")], now=NOW)
    store.counter_add(events=[], now=NOW)
    assert _counts(store) == {("done", 0): 2, ("done", 60): 2, ("failed", 0): 1, ("failed", 60): 1}
    assert store.counter_fold(before=NOW) == 0  # the bucket is not older than NOW
    assert store.counter_fold(before=later(3600)) == 4  # two outcomes, two tiers
    assert _counts(store) == {("done", 0): 2, ("done", 300): 2, ("done", 3600): 2,
                              ("failed", 0): 1, ("failed", 300): 1, ("failed", 3600): 1}
    assert store.counter_fold(before=later(3600)) == 0  # each minute row is folded once
