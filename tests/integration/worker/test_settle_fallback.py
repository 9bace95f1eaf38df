"""A batch settle the database refuses for a value settles again run by run: the runs beside the
refused one land, and the refused run settles with its outcome made storable, so nothing in one
outcome can stop a worker settling the others (a worker that re-sent the same refused batch every
pass would settle nothing else). The refusal is planted: the store
declines any settle that carries the planted job's result."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from django.db import DataError

from tests.app import jobs
from ultimate_jobs import Worker, ops
from ultimate_jobs.db import store_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def refuse_result_of(monkeypatch: pytest.MonkeyPatch) -> Iterator[set[object]]:
    """Job ids whose settle the store refuses while it carries a result (as the database refuses a
    value it cannot store)."""
    refused: set[object] = set()
    store_type = type(store_for("default"))
    settle_and_claim, settle_many = store_type.job_settle_and_claim, store_type.job_settle_many

    def check(settlements: object) -> None:
        for s in settlements:  # type: ignore[attr-defined]
            if s.id in refused and s.result is not None:
                raise DataError("planted: this outcome cannot be stored")

    def guarded_settle_and_claim(self: object, **kw: object) -> object:
        check(kw["settlements"])
        return settle_and_claim(self, **kw)  # type: ignore[arg-type]

    def guarded_settle_many(self: object, **kw: object) -> object:
        check(kw["settlements"])
        return settle_many(self, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(store_type, "job_settle_and_claim", guarded_settle_and_claim)
    monkeypatch.setattr(store_type, "job_settle_many", guarded_settle_many)
    yield refused


def test_a_refused_outcome_settles_alone_and_the_others_land(refuse_result_of: set[object]) -> None:
    others = [jobs.noop.enqueue(key=f"beside-{n}") for n in range(6)]
    bad = jobs.noop.enqueue(key="refused")
    refuse_result_of.add(bad.id)

    with Worker(queues=["default"], concurrency=10, drain_timeout=1) as worker:
        for _ in range(300):  # bounded: before the fix the batch was refused on every pass
            worker.run_once()
            if worker.stats["settled"] + worker.stats["lost"] >= 7:
                break
            time.sleep(0.01)
        stats = dict(worker.stats)

    assert {ops.get_job(r.id)["state"] for r in others} == {"done"}
    job = ops.get_job(bad.id)
    assert (job["state"], job["error_code"], job["result"]) == ("dead", "X_JOB_FAILED", None)
    assert "the outcome could not be stored: DataError: planted: this outcome cannot be stored" in job["last_error"]
    assert stats["settled"] == 7 and stats["lost"] == 0
