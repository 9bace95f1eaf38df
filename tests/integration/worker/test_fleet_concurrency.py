"""Fleet-wide concurrency: FleetSlot slots, busy keys, leftover and expired slots, lost slots."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from ultimate_jobs import NO_TENANT, Concurrency, Worker, ops
from ultimate_jobs.models import FleetSlot, Job

pytestmark = pytest.mark.django_db(transaction=True)


def _wait_for_slot(run) -> None:
    for _ in range(200):
        if run.slot is not None:
            return
        threading.Event().wait(0.05)
    raise AssertionError("the run never took its slot")


def _finish(worker: Worker) -> None:
    for run in list(worker.attempts.values()):
        run.finished.wait(10)
    worker.holdings.collect()
    worker.settler.settle()


def test_a_busy_key_with_when_busy_wait_hands_the_claim_back_uncounted(declare, make_worker) -> None:
    gate = threading.Event()
    ran: list[str] = []

    @declare(idempotency_key="{ref}", tenant=NO_TENANT, concurrency=Concurrency(key="{account}", limit=1))
    def charge(ctx, *, ref: str, account: str) -> None:
        ran.append(ref)
        gate.wait(10)

    first = charge.enqueue(ref="a", account="acct-1")
    second = charge.enqueue(ref="b", account="acct-1")
    charge.enqueue(ref="c", account="acct-2")
    w1, w2 = make_worker(queues=["default"], concurrency=1), make_worker(queues=["default"], concurrency=5)
    (run1,) = w1.run_once()
    assert run1.id == first.id
    _wait_for_slot(run1)  # the slot is taken on the body's thread; "b" must come after it
    w2.run_once()
    assert w2.attempts[second.id].finished.wait(10)
    w2.holdings.collect()
    w2.settler.settle()
    row = Job.objects.get(id=second.id)
    assert (row.state, row.attempt, row.last_error) == ("ready", 0, None)
    assert row.run_at > Job.objects.get(id=first.id).run_at
    gate.set()
    _finish(w1)
    _finish(w2)
    assert sorted(ran) == ["a", "c"]  # another key was not held back; "b" waited its turn
    assert not FleetSlot.objects.exists()  # slots are handed back when bodies return


def test_when_busy_fail_settles_failed_and_never_runs_the_body(declare, make_worker) -> None:
    gate = threading.Event()
    ran: list[str] = []

    @declare(idempotency_key="{ref}", tenant=NO_TENANT,
             concurrency=Concurrency(key="{account}", limit=1, when_busy="fail"))
    def export(ctx, *, ref: str, account: str) -> None:
        ran.append(ref)
        gate.wait(10)

    export.enqueue(ref="a", account="acct")
    refused = export.enqueue(ref="b", account="acct")
    w1, w2 = make_worker(queues=["default"], concurrency=1), make_worker(queues=["default"], concurrency=1)
    (run1,) = w1.run_once()
    _wait_for_slot(run1)
    w2.run_once()
    _finish(w2)
    gate.set()
    _finish(w1)
    job = ops.get_job(refused.id)
    assert (job["state"], job["error_code"], job["stop_reason"]) == ("failed", "X_JOB_KEY_BUSY", "key-busy")
    assert ran == ["a"]


def test_a_runs_own_leftover_slot_never_fails_it(declare, make_worker) -> None:
    @declare(idempotency_key="{ref}", tenant=NO_TENANT, concurrency=Concurrency(limit=1, when_busy="fail"))
    def solo(ctx, *, ref: str) -> str:
        return "ran"

    r = solo.enqueue(ref="x")
    FleetSlot.objects.create(concurrency_key=solo.name, slot=0, holder="killed-worker", job_id=r.id,
                            expires_at=Job.objects.get(id=r.id).created_at + timedelta(hours=1))
    make_worker(queues=["default"], burst=True).run(install_signals=False)
    assert ops.get_job(r.id)["result"] == "ran"


def test_an_expired_slot_of_a_dead_worker_is_taken_over(declare, frozen_clock, make_worker) -> None:
    @declare(idempotency_key="{ref}", tenant=NO_TENANT, concurrency=1)
    def solo2(ctx, *, ref: str) -> str:
        return "ran"

    r = solo2.enqueue(ref="y")
    FleetSlot.objects.create(concurrency_key=solo2.name, slot=0, holder="dead-worker",
                            job_id="01234567-89ab-7def-8123-456789abcdef",
                            expires_at=frozen_clock.now() - timedelta(seconds=1))
    make_worker(queues=["default"], burst=True).run(install_signals=False)
    assert ops.get_job(r.id)["result"] == "ran"


def test_a_slot_lost_to_expiry_cancels_the_run_and_hands_it_back(declare, frozen_clock, make_worker) -> None:
    release = threading.Event()

    @declare(idempotency_key="{ref}", tenant=NO_TENANT, concurrency=1)
    def long(ctx, *, ref: str) -> None:
        release.wait(10)
        ctx.cancelled.check()

    r = long.enqueue(ref="z")
    worker = make_worker(queues=["default"])
    (run,) = worker.run_once()
    for _ in range(100):
        if run.slot is not None:
            break
        release.wait(0.05)
    assert run.slot == (long.name, 0)
    FleetSlot.objects.filter(concurrency_key=long.name).update(holder="thief")
    worker.heartbeat.beat()
    assert run.token.reason == "X_JOB_SLOT_LOST"
    release.set()
    _finish(worker)
    row = Job.objects.get(id=r.id)
    assert (row.state, row.attempt) == ("ready", 0)


def test_burst_runs_jobs_it_handed_back_for_a_busy_key(declare, make_worker) -> None:
    @declare(idempotency_key="{ref}", tenant=NO_TENANT, concurrency=Concurrency(key="{account}", limit=1))
    def serial(ctx, *, ref: str, account: str) -> str:
        return ref

    serial.enqueue_many([{"ref": f"r{n}", "account": "one"} for n in range(4)])
    make_worker(queues=["default"], burst=True, concurrency=4).run(install_signals=False)
    assert set(Job.objects.values_list("state", flat=True)) == {"done"}
