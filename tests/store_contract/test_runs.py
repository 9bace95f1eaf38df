"""The durable-run methods: steps (begin, complete, fail, list) and events (publish, find, purge),
and the suspended waiter's re-check."""

from __future__ import annotations

import json
from datetime import timedelta
from uuid import uuid4

from tests.store_contract import covers
from tests.store_contract.plant import NOW, claimed, job, later
from ultimate_jobs.db.store import ALREADY_COMPLETED, FENCED_OUT, WRITTEN, ClaimedJob, Settlement, Store
from ultimate_jobs.ids import uuid7
from ultimate_jobs.models import JobEvent, JobStep


def _step(store: Store, run: ClaimedJob, name: str, seq: int, *, claim: object = None, wake_in: float | None = None,
          event: str | None = None, match: str | None = None, now=NOW):  # type: ignore[no-untyped-def]
    return store.step_begin(job_id=run.id, claim=claim or run.claim, run_id=run.run_id, name=name, seq=seq,
                            wake_in=wake_in, event=event, event_match=match, now=now)


@covers("step_begin", "step_complete", "step_fail", "step_list")
def test_step_writes_are_fenced_and_a_completed_step_is_final(store: Store) -> None:
    run = claimed(store)
    assert _step(store, run, "sleep", 1, wake_in=60) == NOW
    assert _step(store, run, "sleep", 1, wake_in=60) is None  # the row exists: never overwritten
    assert _step(store, run, "stale", 2, claim=uuid4()) is None  # fenced out

    def complete(name: str, seq: int, output: str, claim: object = None) -> str:
        return store.step_complete(job_id=run.id, claim=claim or run.claim, run_id=run.run_id, name=name, seq=seq,
                                   output=output, count=True, now=later(1))

    def fail(name: str, seq: int, claim: object = None) -> str:
        return store.step_fail(job_id=run.id, claim=claim or run.claim, run_id=run.run_id, name=name, seq=seq,
                               error="boom", count=True, now=later(1))

    assert complete("charge", 3, '{"paid": 1}') == WRITTEN
    assert complete("charge", 3, '{"paid": 2}') == ALREADY_COMPLETED
    assert complete("other", 4, '{"x": 1}', claim=uuid4()) == FENCED_OUT
    assert fail("ship", 5) == WRITTEN
    assert fail("ship", 5) == WRITTEN  # one more failed execution
    assert fail("charge", 3) == ALREADY_COMPLETED
    assert fail("other", 4, claim=uuid4()) == FENCED_OUT

    steps = store.step_list(run_id=run.run_id, now=later(10))
    assert [(s.name, s.status, s.seq, s.executions) for s in steps] == [
        ("sleep", "started", 1, 1), ("charge", "completed", 3, 1), ("ship", "failed", 5, 2)]
    assert json.loads(steps[1].output or "") == {"paid": 1}
    assert steps[0].started_at == NOW and steps[0].wake_at == later(60)
    assert steps[0].remaining == 50.0 and steps[1].remaining is None
    assert not JobStep.objects.using(store.alias).filter(name__in=["stale", "other"]).exists()


def _suspend_on(store: Store, run: ClaimedJob, event: str, match: str, now=NOW) -> None:  # type: ignore[no-untyped-def]
    assert _step(store, run, f"wait:{event}", 1, wake_in=3600, event=event, match=match, now=now) == now
    assert store.job_settle_many(settlements=[Settlement(run.id, run.claim, "suspended", delay=3600.0,
                                                         uncount=True)], now=now) == {run.id}


@covers("event_publish", "event_find")
def test_a_publish_wakes_the_suspended_runs_whose_match_it_contains(store: Store) -> None:
    waiting, other = claimed(store, key="waiting"), claimed(store, key="other")
    _suspend_on(store, waiting, "order.paid", '{"order": 1}')
    _suspend_on(store, other, "order.paid", '{"order": 2}')
    assert job(store, waiting.id).run_at == later(3600)
    woken = store.event_publish(event_id=uuid7(), name="order.paid", payload='{"order": 1, "total": 9}',
                                tenant_id=None, now=later(5))
    assert woken == 1
    assert job(store, waiting.id).run_at == later(5) and job(store, other.id).run_at == later(3600)
    assert store.event_publish(event_id=uuid7(), name="order.shipped", payload='{"order": 2}', tenant_id=None,
                               now=later(6)) == 0

    found = store.event_find(name="order.paid", match='{"order": 1}', since=NOW, tenant_id=None)
    assert json.loads(found or "") == {"order": 1, "total": 9}
    assert json.loads(store.event_find(name="order.paid", match=None, since=NOW, tenant_id=None) or "") == {
        "order": 1, "total": 9}
    assert store.event_find(name="order.paid", match='{"order": 2}', since=NOW, tenant_id=None) is None
    assert store.event_find(name="order.paid", match=None, since=later(6), tenant_id=None) is None
    assert store.event_find(name="order.paid", match=None, since=NOW, tenant_id="acme") is None


@covers("event_publish", "event_find", "job_wake_waiter")
def test_events_are_tenant_scoped(store: Store) -> None:
    acme, bare = claimed(store, key="acme", tenant="acme"), claimed(store, key="bare")
    _suspend_on(store, acme, "invoice.paid", '{"invoice": 1}')
    _suspend_on(store, bare, "invoice.paid", '{"invoice": 1}')
    assert store.event_publish(event_id=uuid7(), name="invoice.paid", payload='{"invoice": 1, "by": "globex"}',
                               tenant_id="globex", now=later(1)) == 0
    assert job(store, acme.id).run_at == later(3600) and job(store, bare.id).run_at == later(3600)
    assert store.job_wake_waiter(job_id=acme.id, now=later(2)) is False
    assert store.event_find(name="invoice.paid", match=None, since=NOW, tenant_id="acme") is None
    assert store.event_publish(event_id=uuid7(), name="invoice.paid", payload='{"invoice": 1, "by": "acme"}',
                               tenant_id="acme", now=later(3)) == 1
    assert job(store, acme.id).run_at == later(3) and job(store, bare.id).run_at == later(3600)
    assert json.loads(store.event_find(name="invoice.paid", match=None, since=NOW, tenant_id="acme") or "") == {
        "invoice": 1, "by": "acme"}
    assert store.event_find(name="invoice.paid", match=None, since=NOW, tenant_id=None) is None
    assert store.event_publish(event_id=uuid7(), name="invoice.paid", payload='{"invoice": 1}', tenant_id=None,
                               now=later(4)) == 1
    assert job(store, bare.id).run_at == later(4)


@covers("job_wake_waiter")
def test_the_waiters_recheck_wakes_a_run_whose_event_came_while_it_was_suspending(store: Store) -> None:
    run = claimed(store)
    assert _step(store, run, "wait:paid", 1, wake_in=3600, event="paid", match='{"order": 1}') == NOW
    # The publish lands while the run is still running: it cannot wake a row that is not suspended.
    assert store.event_publish(event_id=uuid7(), name="paid", payload='{"order": 1}', tenant_id=None,
                               now=later(1)) == 0
    assert store.job_settle_many(settlements=[Settlement(run.id, run.claim, "suspended", delay=3600.0,
                                                         uncount=True)], now=later(2)) == {run.id}
    assert store.job_wake_waiter(job_id=run.id, now=later(3)) is True
    assert job(store, run.id).run_at == later(3)
    assert store.job_wake_waiter(job_id=run.id, now=later(3)) is False  # already due

    quiet = claimed(store, key="quiet")
    _suspend_on(store, quiet, "never", '{"x": 1}', now=later(4))
    assert store.job_wake_waiter(job_id=quiet.id, now=later(5)) is False


@covers("event_purge")
def test_an_event_purge_keeps_events_an_open_wait_could_still_take(store: Store) -> None:
    events = JobEvent.objects.using(store.alias)
    old_id, kept_id, new_id = uuid7(), uuid7(), uuid7()
    store.event_publish(event_id=old_id, name="gone", payload="{}", tenant_id=None, now=NOW)
    store.event_publish(event_id=kept_id, name="awaited", payload="{}", tenant_id=None, now=NOW)
    store.event_publish(event_id=new_id, name="gone", payload="{}", tenant_id=None, now=later(86400))
    run = claimed(store)
    assert _step(store, run, "wait", 1, wake_in=None, event="awaited", match=None, now=NOW - timedelta(hours=1))
    assert store.event_purge(retention=3600, now=later(86400)) == 1
    assert set(events.values_list("id", flat=True)) == {kept_id, new_id}
    assert store.event_purge(retention=3600, now=later(86400)) == 0
