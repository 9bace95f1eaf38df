"""ops.doctor: each invariant check finds what it should, and an absent feature is skipped, not passed."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.factories import JobFactory
from ultimate_jobs import ops

pytestmark = pytest.mark.django_db(transaction=True)


def checks() -> dict[str, dict]:
    return {c["name"]: c for c in ops.doctor()["checks"]}


def test_a_healthy_queue_passes_every_check_that_runs() -> None:
    JobFactory(done=True)
    JobFactory(running=True)  # a live lease: fine
    report = ops.doctor()
    assert report["ok"] is True
    for check in report["checks"]:
        assert check["ok"] and check["ids"] == []
        assert check["skipped"] == check["detail"].startswith("skipped: ")


def test_each_check_names_its_offending_rows(frozen_clock) -> None:
    stuck = JobFactory(running=True, claimed_by="gone", visible_at=frozen_clock.now() - timedelta(seconds=1))
    unfenced = JobFactory(running=True, claim=None)
    runaway = JobFactory(dead=True, attempt=9, max_attempts=3)
    found = checks()
    assert found["stuck-running"]["ids"] == [str(stuck.id)]
    assert found["lease-columns"]["ids"] == [str(unfenced.id)]
    assert found["attempts-in-bounds"]["ids"] == [str(runaway.id)]
    assert found["live-key-unique"]["ok"]  # the partial unique index makes a duplicate impossible
    assert ops.doctor()["ok"] is False


@pytest.mark.parametrize(("name", "feature"), [("concurrency-slots", "JobLease"), ("outbox-backlog", "OutboxEntry")])
def test_a_check_without_its_table_is_skipped(name: str, feature: str) -> None:
    from django.apps import apps

    try:
        apps.get_model("ultimate_jobs", feature)
    except LookupError:
        assert checks()[name]["skipped"] is True
    else:
        assert checks()[name]["skipped"] is False
