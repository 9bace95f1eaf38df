"""The per-attempt history (``Job.attempts``): one entry per settled attempt, written by the settle
statement itself, bounded, with the redacted error of each failure."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from ultimate_jobs import NO_TENANT, Retry, ops
from ultimate_jobs.db import store_for
from ultimate_jobs.db.store import ATTEMPTS_KEPT, Settlement
from ultimate_jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


def test_each_attempt_appends_one_entry_with_its_worker_times_outcome_and_redacted_error(declare, make_worker) -> None:
    calls: list[int] = []

    @declare(name="history.flaky", idempotency_key="flaky", tenant=NO_TENANT,
             retry=Retry(attempts=3, backoff="fixed", delay=0, jitter=False))
    def flaky(ctx: Any, *, password: str) -> str:
        calls.append(ctx.attempt)
        if ctx.attempt < 3:
            raise ValueError(f"boom {ctx.attempt} password=hunter2-{password}")
        return "ok"

    handle = flaky.enqueue(password="s3cret")
    make_worker(queues=["default"], burst=True, worker_id="w-history").run(install_signals=False)
    row = Job.objects.get(id=handle.id)
    assert calls == [1, 2, 3]
    assert [(e["attempt"], e["worker"], e["outcome"]) for e in row.attempts] == [
        (1, "w-history", "retried"), (2, "w-history", "retried"), (3, "w-history", "done")]
    first, second, last = row.attempts
    assert first["error"].splitlines()[-1].startswith("ValueError: boom 1")
    assert "hunter2" not in first["error"] and "s3cret" not in first["error"]
    assert first["error_code"] == "X_JOB_FAILED" and last["error"] is None and last["error_code"] is None
    starts = [datetime.fromisoformat(e["started_at"]) for e in row.attempts]
    ends = [datetime.fromisoformat(e["finished_at"]) for e in row.attempts]
    assert all(s <= e for s, e in zip(starts, ends, strict=True))
    assert ends[0] <= starts[1] and ends[1] <= starts[2]
    shown = ops.get_job(handle.id)["attempts"]  # the operator's view: the same entries, redacted
    assert [(a["attempt"], a["outcome"]) for a in shown] == [(1, "retried"), (2, "retried"), (3, "done")]
    assert "boom 2" in shown[1]["error"] and "hunter2" not in shown[1]["error"]


def test_the_history_keeps_the_newest_entries_only(declare) -> None:
    @declare(name="history.many", idempotency_key="many", tenant=NO_TENANT)
    def many(ctx: Any) -> None:
        return None

    handle = many.enqueue()
    store = store_for(None)
    for n in range(ATTEMPTS_KEPT + 3):
        (claimed,) = store.job_claim(queue="default", names=["history.many"], limit=1, worker_id=f"w{n}",
                                     visibility=30, now=None)
        store.job_settle_many(settlements=[Settlement(claimed.id, claimed.claim, "retry", last_error="x" * 9000,
                                                      error_code="X_JOB_FAILED")], now=None)
    attempts = Job.objects.get(id=handle.id).attempts
    assert len(attempts) == ATTEMPTS_KEPT
    assert [e["attempt"] for e in attempts] == list(range(4, ATTEMPTS_KEPT + 4))
    assert attempts[-1]["worker"] == f"w{ATTEMPTS_KEPT + 2}"
    assert len(attempts[-1]["error"]) < 4100  # cut in the middle, the end kept


def test_a_handed_back_attempt_adds_no_entry(declare) -> None:
    @declare(name="history.back", idempotency_key="back", tenant=NO_TENANT)
    def back(ctx: Any) -> None:
        return None

    handle = back.enqueue()
    store = store_for(None)
    (claimed,) = store.job_claim(queue="default", names=["history.back"], limit=1, worker_id="w", visibility=30,
                                 now=None)
    store.job_settle_many(settlements=[Settlement(claimed.id, claimed.claim, "ready", uncount=True)], now=None)
    assert Job.objects.get(id=handle.id).attempts == []


def test_a_lapsed_lease_adds_an_entry_naming_the_worker_that_lost_it(declare) -> None:
    @declare(name="history.lapsed", idempotency_key="lapsed", tenant=NO_TENANT)
    def lapsed(ctx: Any) -> None:
        return None

    handle = lapsed.enqueue()
    store = store_for(None)
    store.job_claim(queue="default", names=["history.lapsed"], limit=1, worker_id="w-dead", visibility=30, now=None)
    later = timezone.now() + timedelta(minutes=5)
    (rescued,) = store.job_rescue(now=later, names=["history.lapsed"], no_dead_letter=[])
    (entry,) = Job.objects.get(id=handle.id).attempts
    assert (rescued.id, entry["attempt"], entry["worker"], entry["outcome"], entry["error_code"]) == (
        handle.id, 1, "w-dead", "retried", "X_LEASE_LAPSED")
    assert "w-dead" in entry["error"] and entry["started_at"] is None
