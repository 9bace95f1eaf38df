"""The job methods: insert and dedupe, claim, settle, heartbeat, hand-back, rescue, purge, progress."""

from __future__ import annotations

from datetime import timedelta
from uuid import uuid4

from tests.store_contract import covers
from tests.store_contract.plant import NAME, NOW, claim, claimed, insert, job, job_row, later
from ultimate_jobs.db.store import Inserted, Purged, Rescued, SettledAndClaimed, Settlement, Store
from ultimate_jobs.models import Job, JobCounter, JobStep, QueuePause


@covers("job_insert_many")
def test_insert_answers_each_row_in_order_and_dedupes_on_the_live_key(store: Store) -> None:
    a, b, late = job_row(key="a"), job_row(key="b"), job_row(key="late", delay=60.0)
    assert store.job_insert_many(rows=[a, b, late], now=NOW) == [
        Inserted(id=a.id, run_id=a.run_id, deduped=False), Inserted(id=b.id, run_id=b.run_id, deduped=False),
        Inserted(id=late.id, run_id=late.run_id, deduped=False)]
    assert (job(store, a.id).state, job(store, late.id).state) == ("ready", "delayed")
    assert job(store, late.id).run_at == later(60)

    again, other_tenant = job_row(key="a"), job_row(key="a", tenant="t1")
    answers = store.job_insert_many(rows=[again, other_tenant], now=NOW)
    assert answers == [Inserted(id=a.id, run_id=a.run_id, deduped=True),
                       Inserted(id=other_tenant.id, run_id=other_tenant.run_id, deduped=False)]
    assert Job.objects.using(store.alias).count() == 4


@covers("job_insert_many")
def test_a_finished_job_frees_its_key(store: Store) -> None:
    first = insert(store, key="k")
    Job.objects.using(store.alias).filter(id=first).update(state="done", finished_at=NOW)
    second = job_row(key="k")
    assert store.job_insert_many(rows=[second], now=NOW) == [Inserted(id=second.id, run_id=second.run_id,
                                                                      deduped=False)]


@covers("job_claim")
def test_a_claim_takes_runnable_rows_in_priority_order_under_a_new_token(store: Store) -> None:
    low, high, mid = (insert(store, key=k, priority=p) for k, p in (("low", 5), ("high", 0), ("mid", 1)))
    late = insert(store, key="later", delay=60.0)
    insert(store, key="other-code", name="contract.other")
    taken = claim(store, limit=2)
    assert {c.id for c in taken} == {high, mid}
    for c in taken:
        row = job(store, c.id)
        assert (row.state, row.attempt, row.claimed_by, row.claim) == ("running", 1, "w1", c.claim)
        assert row.visible_at == later(30) and c.name == NAME and c.queue == "q" and c.attempt == 1
    assert taken[0].claim != taken[1].claim
    assert [c.id for c in claim(store)] == [low]  # the delayed row is not due, the other name not ours
    assert claim(store) == []
    assert [c.id for c in claim(store, now=later(61))] == [late]  # due now


@covers("job_claim")
def test_a_claim_skips_blocked_tenants_paused_queues_and_unknown_names(store: Store) -> None:
    blocked = insert(store, key="b", tenant="t-blocked")
    free = insert(store, key="f", tenant="t-free")
    assert claim(store, names=()) == []
    QueuePause.objects.using(store.alias).create(queue="q", paused_at=NOW)
    assert claim(store) == []
    QueuePause.objects.using(store.alias).all().delete()
    taken = store.job_claim(queue="q", names=[NAME], limit=10, worker_id="w1", visibility=30, now=NOW,
                            blocked_tenants=["t-blocked"])
    assert [c.id for c in taken] == [free]
    assert job(store, blocked).state == "ready"


@covers("job_settle_many")
def test_a_settle_is_fenced_on_the_claim_token(store: Store) -> None:
    run = claimed(store)
    stale = Settlement(run.id, uuid4(), "done", result='{"ok": true}')
    assert store.job_settle_many(settlements=[stale], now=NOW) == set()
    assert job(store, run.id).state == "running"

    done = Settlement(run.id, run.claim, "done", result='{"ok": true}')
    assert store.job_settle_many(settlements=[done], now=later(1)) == {run.id}
    row = job(store, run.id)
    assert (row.state, row.result, row.finished_at, row.visible_at) == ("done", {"ok": True}, later(1), None)
    assert store.job_settle_many(settlements=[done], now=later(2)) == set()  # settled once
    counted = JobCounter.objects.using(store.alias).filter(name=NAME, outcome="done", width=0)
    assert sum(c.count for c in counted) == 1


@covers("job_settle_many")
def test_a_retry_is_due_after_its_delay_and_a_handed_back_attempt_is_uncounted(store: Store) -> None:
    retried, handed_back = claimed(store, key="r"), claimed(store, key="h")
    settled = store.job_settle_many(settlements=[
        Settlement(retried.id, retried.claim, "retry", last_error="boom", error_code="X_TEST", delay=60.0),
        Settlement(handed_back.id, handed_back.claim, "ready", uncount=True)], now=NOW)
    assert settled == {retried.id, handed_back.id}
    row = job(store, retried.id)
    assert (row.state, row.attempt, row.run_at, row.last_error, row.finished_at) == ("delayed", 1, later(60), "boom",
                                                                                      None)
    row = job(store, handed_back.id)
    assert (row.state, row.attempt, row.run_at) == ("ready", 0, NOW)
    outcomes = {c.outcome for c in JobCounter.objects.using(store.alias).filter(width=0)}
    assert outcomes == {"retried", "interrupted"}


@covers("job_settle_and_claim")
def test_settle_and_claim_settles_then_claims_per_queue(store: Store) -> None:
    run = claimed(store, key="running")
    a, b = insert(store, key="a", queue="qa"), insert(store, key="b", queue="qb")
    answer = store.job_settle_and_claim(settlements=[Settlement(run.id, run.claim, "done")],
                                        claims={"qa": 5, "qb": 5}, names=[NAME], worker_id="w2", visibility=30,
                                        now=NOW)
    assert isinstance(answer, SettledAndClaimed)
    assert answer.settled == {run.id}
    assert {q: [c.id for c in rows] for q, rows in answer.claimed.items()} == {"qa": [a], "qb": [b]}
    assert job(store, run.id).state == "done" and job(store, a).claimed_by == "w2"
    stale = store.job_settle_and_claim(settlements=[Settlement(run.id, run.claim, "done")], claims={}, names=[],
                                       worker_id="w2", visibility=30, now=NOW)
    assert stale == SettledAndClaimed(settled=set(), claimed={})


@covers("job_heartbeat")
def test_a_heartbeat_renews_only_leases_still_held_under_their_token(store: Store) -> None:
    held, lost = claimed(store, key="held"), claimed(store, key="lost")
    renewed = store.job_heartbeat(held=[(held.id, held.claim), (lost.id, uuid4())], worker_id="w1", visibility=60,
                                  now=later(10))
    assert renewed == {held.id}
    assert job(store, held.id).visible_at == later(70) and job(store, lost.id).visible_at == later(30)
    assert store.job_heartbeat(held=[(held.id, held.claim)], worker_id="w-other", visibility=60, now=NOW) == set()


@covers("job_release_unheld")
def test_rows_claimed_under_a_worker_it_does_not_hold_are_handed_back_uncounted(store: Store) -> None:
    kept, lost = claimed(store, key="kept"), claimed(store, key="lost")
    claimed(store, key="theirs", queue="q2")  # another worker's claim is never touched
    Job.objects.using(store.alias).filter(queue="q2").update(claimed_by="w2")
    assert store.job_release_unheld(worker_id="w1", held=[kept.id], now=later(5)) == [lost.id]
    row = job(store, lost.id)
    assert (row.state, row.attempt, row.visible_at, row.run_at) == ("ready", 0, None, later(5))
    assert job(store, kept.id).state == "running"
    assert store.job_release_unheld(worker_id="w1", held=[kept.id], now=later(5)) == []


@covers("job_rescue")
def test_a_lapsed_lease_is_rescued_once_and_the_stale_worker_settles_nothing(store: Store) -> None:
    run = claimed(store)
    assert store.job_rescue(now=later(10), names=[NAME], no_dead_letter=[]) == []  # the lease is live
    assert store.job_rescue(now=later(31), names=["contract.other"], no_dead_letter=[]) == []  # not our code
    assert store.job_rescue(now=later(31), names=[NAME], no_dead_letter=[]) == [
        Rescued(id=run.id, name=NAME, queue="q", state="ready")]
    assert store.job_rescue(now=later(32), names=[NAME], no_dead_letter=[]) == []
    row = job(store, run.id)
    assert (row.state, row.error_code, row.attempt, row.finished_at) == ("ready", "X_LEASE_LAPSED", 1, None)
    assert store.job_settle_many(settlements=[Settlement(run.id, run.claim, "done")], now=later(33)) == set()
    assert store.job_heartbeat(held=[(run.id, run.claim)], worker_id="w1", visibility=30, now=later(33)) == set()


@covers("job_rescue")
def test_a_lapse_on_the_final_attempt_dead_letters_or_fails(store: Store) -> None:
    dead = claimed(store, key="dead", max_attempts=1)
    insert(store, key="failed", name="contract.no-dlq", max_attempts=1)
    (failed,) = claim(store, names=("contract.no-dlq",))
    rescued = store.job_rescue(now=later(31), names=[NAME, "contract.no-dlq"], no_dead_letter=["contract.no-dlq"])
    assert sorted(rescued) == sorted([Rescued(id=dead.id, name=NAME, queue="q", state="dead"),
                                      Rescued(id=failed.id, name="contract.no-dlq", queue="q", state="failed")])
    row = job(store, dead.id)
    assert (row.state, row.stop_reason, row.finished_at) == ("dead", "lease-lapsed", later(31))


@covers("job_purge_finished")
def test_a_purge_deletes_finished_jobs_past_retention_and_their_orphan_steps(store: Store) -> None:
    jobs = Job.objects.using(store.alias)
    old_done, old_dead, new_done, live = (insert(store, key=k) for k in ("old-done", "old-dead", "new-done", "live"))
    jobs.filter(id=old_done).update(state="done", finished_at=NOW - timedelta(days=10))
    jobs.filter(id=old_dead).update(state="dead", finished_at=NOW - timedelta(days=10))
    jobs.filter(id=new_done).update(state="done", finished_at=NOW - timedelta(hours=1))
    JobStep.objects.using(store.alias).create(run_id=job(store, old_done).run_id, name="s", status="completed")
    answer = store.job_purge_finished(done_retention=86400, dead_retention=86400, limit=100, now=NOW)
    assert answer == Purged(jobs=2, steps=1)
    assert set(jobs.values_list("id", flat=True)) == {new_done, live}
    assert store.job_purge_finished(done_retention=86400, dead_retention=86400, limit=100, now=NOW) == Purged(0, 0)


@covers("job_progress")
def test_progress_lands_only_under_the_claim_token(store: Store) -> None:
    run = claimed(store)
    assert store.job_progress(job_id=run.id, claim=run.claim, progress='{"done": 1, "total": 2}', now=NOW) is True
    assert job(store, run.id).progress == {"done": 1, "total": 2}
    assert store.job_progress(job_id=run.id, claim=uuid4(), progress='{"done": 2}', now=NOW) is False
    assert job(store, run.id).progress == {"done": 1, "total": 2}


@covers("queue_wake")
def test_queue_wake_writes_nothing(store: Store) -> None:
    a = insert(store)
    assert store.queue_wake(queues=["q", "q"]) is None
    assert store.queue_wake(queues=[]) is None
    assert job(store, a).state == "ready"


@covers("job_insert_many")
def test_a_large_batch_answers_in_order_dedupes_and_stamps_the_callers_clock(store: Store) -> None:
    # 600 rows: past COPY_MIN_ROWS, so PostgreSQL writes it by COPY (inserts.py); SQLite as ever.
    held = insert(store, key="held-7")
    rows = [job_row(key=f"held-{i}" if i == 7 else f"big-{i}", tenant="t1" if i % 3 == 0 else None,
                    delay=60.0 if i % 5 == 0 else 0.0) for i in range(600)]
    answers = store.job_insert_many(rows=rows, now=NOW)
    assert answers[7] == Inserted(id=held, run_id=job(store, held).run_id, deduped=True)
    assert [a for i, a in enumerate(answers) if i != 7] == [
        Inserted(id=r.id, run_id=r.run_id, deduped=False) for i, r in enumerate(rows) if i != 7]
    late, now = job(store, rows[5].id), job(store, rows[1].id)
    assert (late.state, late.run_at, now.state, now.run_at, now.created_at) == ("delayed", later(60), "ready", NOW, NOW)
    assert (job(store, rows[3].id).tenant_id, now.payload, now.attempt, now.attempts) == ("t1", {"n": 1}, 0, [])
    assert Job.objects.using(store.alias).count() == 600
