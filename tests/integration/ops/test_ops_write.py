"""ops writes: retry, cancel, promote, remove and their bulk forms, with every refusal, on both
databases; and the queue, worker and counter reads."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from tests.app import jobs
from tests.factories import JobFactory, JobStepFactory
from ultimate_jobs import JobsError, Worker, clock, ops
from ultimate_jobs.models import Job, JobStep

pytestmark = pytest.mark.django_db(transaction=True)


def drain() -> None:
    with Worker(queues=["default"], burst=True) as worker:
        worker.run(install_signals=False)


def refused(code: str, fn, *args, **kwargs) -> JobsError:
    with pytest.raises(JobsError) as err:
        fn(*args, **kwargs)
    assert err.value.code == code, err.value
    return err.value


def test_a_dead_job_retried_runs_again_with_a_fresh_budget() -> None:
    r = jobs.flaky.enqueue(key="again", failures=1)
    Job.objects.filter(id=r.id).update(state="dead", attempt=5, stop_reason="attempts-exhausted")
    job = ops.retry_job(str(r.id))
    assert (job["state"], job["attempt"], job["stop_reason"], job["run_id"]) == ("ready", 0, None, str(r.run_id))
    drain()
    assert ops.get_job(r.id)["state"] == "done"


def test_retry_twice_refuses_the_second_and_live_jobs_are_never_requeued() -> None:
    dead = JobFactory(dead=True)
    ops.retry_job(dead.id)
    err = refused("X_JOB_NOT_REQUEUEABLE", ops.retry_job, dead.id)
    assert "ready" in err.cause
    running = JobFactory(running=True)
    err = refused("X_JOB_NOT_REQUEUEABLE", ops.retry_job, running.id)
    assert "Cancel it" in err.fix
    assert Job.objects.get(id=running.id).state == "running"
    refused("X_JOB_NOT_FOUND", ops.retry_job, "01234567-89ab-7def-8123-456789abcdef")
    refused("X_ID_INVALID", ops.retry_job, "nope")


def test_retry_refuses_when_a_live_job_holds_the_key() -> None:
    dead = JobFactory(dead=True, idempotency_key="shared")
    live = JobFactory(idempotency_key="shared")
    err = refused("X_JOB_DUPLICATE", ops.retry_job, dead.id)
    assert str(live.id) in err.cause
    assert Job.objects.get(id=dead.id).state == "dead"


def test_retry_from_a_step_drops_it_and_every_later_step() -> None:
    dead = JobFactory(dead=True)
    for seq, (name, status) in enumerate([("load", "completed"), ("charge", "failed"), ("email", "completed")]):
        JobStepFactory(run_id=dead.run_id, name=name, status=status, seq=seq)
    refused("X_JOB_INPUT_INVALID", ops.retry_job, dead.id, from_step="nope")
    job = ops.retry_job(dead.id, from_step="charge")
    assert [s["name"] for s in job["steps"]] == ["load"]
    assert job["state"] == "ready"


def test_cancel_stops_live_jobs_and_refuses_finished_ones() -> None:
    ready = JobFactory()
    job = ops.cancel_job(ready.id, reason="bad input")
    assert (job["state"], job["stop_reason"]) == ("cancelled", "cancelled")
    assert "bad input" in job["last_error"]
    refused("X_JOB_NOT_CANCELLABLE", ops.cancel_job, ready.id)
    refused("X_JOB_NOT_CANCELLABLE", ops.cancel_job, JobFactory(dead=True).id)
    refused("X_JOB_NOT_FOUND", ops.cancel_job, "01234567-89ab-7def-8123-456789abcdef")
    assert ops.counters("tests.noop")["totals"] == {"cancelled": 1}


def test_cancelling_a_running_job_stops_it_at_the_next_heartbeat(declare, make_worker) -> None:
    import threading

    from ultimate_jobs import NO_TENANT

    release = threading.Event()

    @declare(idempotency_key="{k}", tenant=NO_TENANT)
    def long(ctx, *, k: str) -> str:
        ctx.cancelled.wait(10)
        release.set()
        ctx.cancelled.check()
        return "finished"

    r = long.enqueue(k="x")
    worker = make_worker(queues=["default"])
    worker.run_once()
    ops.cancel_job(r.id)
    worker.heartbeat.beat()
    assert release.wait(5)
    assert worker.attempts[r.id].token.reason == "X_JOB_LEASE_LOST"
    worker.attempts[r.id].finished.wait(5)
    worker.holdings.collect()
    worker.settler.settle()
    assert Job.objects.get(id=r.id).state == "cancelled"  # the fenced settle never un-cancels it


def test_promote_runs_a_delayed_job_now_and_refuses_others() -> None:
    delayed = JobFactory(delayed=True)
    job = ops.promote_job(delayed.id)
    assert job["state"] == "ready"
    assert Job.objects.get(id=delayed.id).run_at <= clock.now() + timedelta(seconds=5)
    refused("X_JOB_NOT_PROMOTABLE", ops.promote_job, delayed.id)  # runnable already
    refused("X_JOB_NOT_PROMOTABLE", ops.promote_job, JobFactory(dead=True).id)


def test_remove_deletes_anything_but_a_running_job() -> None:
    dead = JobFactory(dead=True)
    JobStepFactory(run_id=dead.run_id, name="only")
    assert ops.remove_job(dead.id) == {"id": str(dead.id), "removed": True}
    assert not Job.objects.filter(id=dead.id).exists()
    assert not JobStep.objects.filter(run_id=dead.run_id).exists()
    running = JobFactory(running=True)
    refused("X_JOB_NOT_REMOVABLE", ops.remove_job, running.id)
    assert Job.objects.filter(id=running.id).exists()
    refused("X_JOB_NOT_FOUND", ops.remove_job, dead.id)


def test_requeue_many_is_bounded_and_remaining_counts_only_movable_rows() -> None:
    Job.objects.bulk_create([JobFactory.build(dead=True, queue="bulk") for _ in range(1003)])
    JobFactory(dead=True, queue="bulk", idempotency_key="held")
    JobFactory(queue="bulk", idempotency_key="held")  # a live job holds this key: never moves
    first = ops.requeue_many(state="dead", queue="bulk")
    assert first == {"affected": 1000, "remaining": 3}
    assert ops.requeue_many(state="dead", queue="bulk") == {"affected": 3, "remaining": 0}
    assert ops.requeue_many(state="dead", queue="bulk") == {"affected": 0, "remaining": 0}
    assert Job.objects.filter(queue="bulk", state="dead").count() == 1


def test_requeue_many_moves_one_of_several_finished_jobs_sharing_a_key() -> None:
    JobFactory(dead=True, idempotency_key="twin")
    JobFactory(state="cancelled", idempotency_key="twin")
    assert ops.requeue_many(ids=[str(j.id) for j in Job.objects.all()]) == {"affected": 1, "remaining": 0}


def test_bulk_calls_refuse_unbounded_or_impossible_filters() -> None:
    refused("X_JOB_INPUT_INVALID", ops.requeue_many, queue="default")
    refused("X_JOB_NOT_REQUEUEABLE", ops.requeue_many, state="running")
    refused("X_JOB_NOT_REMOVABLE", ops.remove_many, state="running")
    refused("X_JOB_NOT_PROMOTABLE", ops.promote_many, state="dead")
    refused("X_JOB_INPUT_INVALID", ops.remove_many, ids=["01234567-89ab-7def-8123-456789abcdef"] * 1001)


def test_remove_many_and_promote_many() -> None:
    for _ in range(3):
        JobFactory(delayed=True, queue="p")
    running = JobFactory(running=True, queue="p")
    assert ops.promote_many(state="delayed", queue="p") == {"affected": 3, "remaining": 0}
    assert ops.remove_many(ids=[str(j.id) for j in Job.objects.filter(queue="p")]) == {"affected": 3,
                                                                                         "remaining": 0}
    assert list(Job.objects.filter(queue="p").values_list("id", flat=True)) == [running.id]


def test_pause_and_resume_a_queue(make_worker) -> None:
    jobs.noop.enqueue(key="paused")
    assert ops.pause_queue("default", by="ann")["paused"] is True
    assert [p["queue"] for p in ops.paused_queues()] == ["default"]
    assert make_worker(queues=["default"]).run_once() == []  # the claim skips a paused queue
    assert ops.resume_queue("default") == {"queue": "default", "paused": False, "was_paused": True}
    assert ops.paused_queues() == []
    refused("X_QUEUE_INVALID", ops.pause_queue, "Bad Queue")


def test_queue_stats_put_every_row_in_exactly_one_bucket(frozen_clock) -> None:
    JobFactory(run_at=frozen_clock.now() - timedelta(seconds=90))
    JobFactory(state="delayed", run_at=frozen_clock.now() - timedelta(seconds=10))  # due: counts as ready
    JobFactory(delayed=True)
    JobFactory(running=True)
    JobFactory(dead=True)
    JobFactory(done=True)
    JobFactory(state="suspended")
    JobFactory(state="failed")
    JobFactory(state="cancelled")
    JobFactory(queue="other", dead=True)
    ops.pause_queue("other")
    stats = {s["queue"]: s for s in ops.queue_stats()}
    default = stats["default"]
    assert {k: default[k] for k in ("ready", "delayed", "running", "suspended", "done", "failed", "dead",
                                    "cancelled", "total")} == {
        "ready": 2, "delayed": 1, "running": 1, "suspended": 1, "done": 1, "failed": 1, "dead": 1,
        "cancelled": 1, "total": 9}
    assert default["oldest_ready_age"] == 90.0 and default["paused"] is False
    assert stats["other"]["dead"] == 1 and stats["other"]["paused"] is True
    assert stats["other"]["oldest_ready_age"] is None
    assert json.loads(json.dumps(ops.queue_stats())) == ops.queue_stats()


def test_counters_move_with_each_settle() -> None:
    jobs.flaky.enqueue(key="c1", failures=1)
    jobs.always_fails.enqueue(key="c2")
    drain()
    assert ops.counters("tests.flaky")["totals"] == {"retried": 1, "done": 1}
    assert ops.counters("tests.always_fails")["totals"] == {"retried": 2, "dead": 1}
    hourly = ops.counters("tests.flaky", since=clock.now() - timedelta(days=3))
    assert hourly["width"] == 300 and hourly["totals"] == {"retried": 1, "done": 1}
    totals = {(t["queue"], t["outcome"]): t["count"] for t in ops.counter_totals()}
    assert totals[("default", "dead")] == 1 and totals[("default", "done")] == 1


def test_counters_fold_into_coarser_tiers_and_expire(frozen_clock) -> None:
    from ultimate_jobs import clock as jobs_clock
    from ultimate_jobs.models import JobCounter
    from ultimate_jobs.runtime.housekeeping import prune_counters

    jobs.noop.enqueue(key="p")
    jobs.always_fails.enqueue(key="p")
    drain()
    settled_at = frozen_clock.now()
    assert sorted(set(JobCounter.objects.values_list("width", flat=True))) == [0, 60]  # two upserts a settle
    week = ops.counters(since=settled_at - timedelta(days=3))
    assert week["width"] == 300 and week["totals"] == {"done": 1, "retried": 2, "dead": 1}
    jobs_clock.advance(timedelta(days=2))
    assert prune_counters() == 0
    assert sorted(set(JobCounter.objects.values_list("width", flat=True))) == [0, 300, 3600]  # minutes folded
    assert ops.counters(since=settled_at - timedelta(hours=1))["totals"] == {"done": 1, "retried": 2, "dead": 1}
    month = ops.counters(since=settled_at - timedelta(days=10))
    assert month["width"] == 3600 and month["totals"] == {"done": 1, "retried": 2, "dead": 1}
    assert prune_counters() == 0  # folding twice moves nothing twice
    assert ops.counters(since=settled_at - timedelta(hours=1))["totals"] == {"done": 1, "retried": 2, "dead": 1}
    jobs_clock.advance(timedelta(days=31))
    assert prune_counters() > 0
    assert set(JobCounter.objects.values_list("width", flat=True)) == {0}
    totals = {(t["queue"], t["outcome"]): t["count"] for t in ops.counter_totals()}
    assert totals == {("default", "done"): 1, ("default", "retried"): 2, ("default", "dead"): 1}


def test_a_worker_registers_refreshes_and_leaves(frozen_clock, make_worker) -> None:
    from ultimate_jobs.models import WorkerHeartbeat

    worker = make_worker(queues=["default", "other"], concurrency=3)
    worker.presence.beat([])
    (row,) = ops.workers()
    assert (row["id"], row["queues"], row["slots"], row["in_flight_count"], row["status"],
            row["last_heartbeat_age"]) == (worker.worker_id, ["default", "other"], 3, 0, "alive", 0.0)
    frozen_clock.advance(timedelta(seconds=29))  # within one visibility timeout: still alive
    assert [(w["status"], w["last_heartbeat_age"]) for w in ops.workers()] == [("alive", 29.0)]
    frozen_clock.advance(timedelta(seconds=2))  # one visibility timeout without a beat: presumed dead
    assert [(w["id"], w["status"], w["last_heartbeat_age"]) for w in ops.workers()] == [
        (worker.worker_id, "presumed-dead", 31.0)]
    assert ops.overview()["workers"] == []  # the overview counts the living
    worker.heartbeat.beat()
    assert [(w["id"], w["status"]) for w in ops.workers()] == [(worker.worker_id, "alive")]
    frozen_clock.advance(timedelta(hours=1, seconds=31))  # swept an hour after it expired: no longer listed
    assert ops.workers() == []
    worker.presence.leave()
    assert not WorkerHeartbeat.objects.exists()


def test_a_lost_lease_is_counted_but_an_operator_cancel_is_not(frozen_clock, declare, make_worker) -> None:
    import threading

    from ultimate_jobs import NO_TENANT

    release = threading.Event()

    @declare(name="tests.held", idempotency_key="{k}", tenant=NO_TENANT)
    def held(ctx, *, k: str) -> None:
        release.wait(10)

    reclaimed, cancelled = held.enqueue(k="r"), held.enqueue(k="c")
    worker = make_worker(queues=["default"])
    worker.run_once()
    Job.objects.filter(id=reclaimed.id).update(claim="01234567-89ab-7def-8123-456789abcdef")
    ops.cancel_job(cancelled.id)
    worker.heartbeat.beat()
    release.set()
    assert ops.counters("tests.held")["totals"] == {"cancelled": 1, "lease-lost": 1}
    assert {(t["outcome"], t["count"]) for t in ops.counter_totals()} >= {("lease-lost", 1)}
