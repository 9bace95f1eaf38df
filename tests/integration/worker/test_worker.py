"""The worker's claim, settle, retry and dead-letter rules, in-process on both databases."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from tests.app import jobs
from ultimate_jobs import NO_TENANT, JobsError, Worker, ops, register_error_retry
from ultimate_jobs.models import Job
from ultimate_jobs.retry import _ERROR_CLASSES

pytestmark = pytest.mark.django_db(transaction=True)


def drain(**options: object) -> dict[str, int]:
    with Worker(queues=["default"], burst=True, **options) as worker:  # type: ignore[arg-type]
        return worker.run(install_signals=False)


def test_a_body_failing_twice_then_succeeding_ends_done_at_attempt_3() -> None:
    r = jobs.flaky.enqueue(key="f", failures=2)
    drain()
    job = ops.get_job(r.id)
    assert (job["state"], job["attempt"], job["result"]) == ("done", 3, {"succeeded_on": 3})
    assert job["last_error"] is None  # no current failure; the history of the last one is in attempts
    assert "flaky failure 2 of 2" in job["attempts"][1]["error"]


def test_a_body_always_failing_ends_dead_with_attempts_exhausted() -> None:
    r = jobs.always_fails.enqueue(key="a")
    drain()
    job = ops.get_job(r.id)
    assert (job["state"], job["attempt"], job["stop_reason"]) == ("dead", 3, "attempts-exhausted")
    assert "always fails (attempt 3)" in job["last_error"]
    assert job["finished_at"] is not None and job["next_retry_at"] is None


def test_dead_letter_false_ends_failed() -> None:
    r = jobs.no_dead_letter.enqueue(key="n")
    drain()
    assert ops.get_job(r.id)["state"] == "failed"


def test_terminal_dead_letters_on_the_first_attempt_and_says_why() -> None:
    r = jobs.terminal.enqueue(key="t")
    drain()
    job = ops.get_job(r.id)
    assert (job["state"], job["attempt"], job["stop_reason"]) == ("dead", 1, "terminal")
    assert "the card was declined" in job["last_error"]
    assert "not retried: this code is classified terminal" in job["last_error"]


def test_a_code_registered_terminal_stops_at_once() -> None:
    register_error_retry({"X_STORE_DECLINED": "terminal"})
    try:
        r = jobs.coded.enqueue(key="c", code="X_STORE_DECLINED")
        drain()
    finally:
        _ERROR_CLASSES.pop("X_STORE_DECLINED")
    job = ops.get_job(r.id)
    assert (job["state"], job["attempt"], job["error_code"]) == ("dead", 1, "X_STORE_DECLINED")


def test_unclassified_codes_keep_the_schedule(frozen_clock, make_worker) -> None:
    r = jobs.coded.enqueue(key="u", code="X_SOMETHING")
    worker = make_worker(queues=["default"])
    worker.run_once()
    _settle(worker)
    row = Job.objects.get(id=r.id)
    assert (row.state, row.attempt, row.error_code) == ("delayed", 1, "X_SOMETHING")
    assert row.run_at - frozen_clock.now() == timedelta(seconds=1)  # Retry(delay=1s), attempt 1


def test_retry_after_uses_the_stated_delay_clamped_and_burns_an_attempt(frozen_clock, make_worker) -> None:
    worker = make_worker(queues=["default"])
    short = jobs.retry_after.enqueue(key="s", seconds=7)
    long = jobs.retry_after.enqueue(key="l", seconds=3600)
    worker.run_once()
    _settle(worker)
    now = frozen_clock.now()
    s, lg = Job.objects.get(id=short.id), Job.objects.get(id=long.id)
    assert (s.attempt, s.run_at - now) == (1, timedelta(seconds=7))
    assert lg.run_at - now == timedelta(seconds=60)  # clamped by max_delay


def test_a_retry_waits_for_its_delay_then_runs(frozen_clock, make_worker) -> None:
    r = jobs.coded.enqueue(key="w", code="LATER")
    worker = make_worker(queues=["default"])
    worker.run_once()
    _settle(worker)
    assert worker.run_once() == []  # not due yet
    frozen_clock.advance(timedelta(seconds=1))
    assert [run.id for run in worker.run_once()] == [r.id]
    _settle(worker)
    assert Job.objects.get(id=r.id).attempt == 2


def test_an_unknown_job_name_stays_ready_and_is_never_discarded() -> None:
    r = jobs.noop.enqueue(key="known")
    Job.objects.filter(id=r.id).update(name="not.deployed.here")
    other = jobs.noop.enqueue(key="known2")
    drain()
    row = Job.objects.get(id=r.id)
    assert (row.state, row.attempt) == ("ready", 0)
    assert Job.objects.get(id=other.id).state == "done"


def test_a_worker_only_claims_its_queues(make_worker) -> None:
    mine = jobs.other_queue.enqueue(key="o")
    theirs = jobs.noop.enqueue(key="d")
    make_worker(queues=["other"], burst=True).run(install_signals=False)
    assert Job.objects.get(id=mine.id).state == "done"
    assert Job.objects.get(id=theirs.id).state == "ready"


def test_claim_order_is_priority_then_run_at(make_worker) -> None:
    low = jobs.noop.using(priority=5).enqueue(key="low")
    high = jobs.noop.using(priority=-5).enqueue(key="high")
    mid = jobs.noop.enqueue(key="mid")
    started = make_worker(queues=["default"], concurrency=1).run_once()
    assert [run.id for run in started] == [high.id]
    assert {low.id, mid.id}.isdisjoint({run.id for run in started})


def test_claim_with_no_queues_is_refused() -> None:
    with pytest.raises(JobsError) as err:
        Worker(queues=[])
    assert err.value.code == "X_JOB_CLAIM_QUEUES_EMPTY"


def test_concurrency_bounds_a_pass_and_is_split_over_queues(make_worker) -> None:
    jobs.noop.enqueue_many([{"key": f"c{i}"} for i in range(10)])
    jobs.other_queue.enqueue_many([{"key": f"o{i}"} for i in range(10)])
    worker = make_worker(queues=["default", "other"], concurrency=4)
    started = worker.run_once()
    assert len(started) == 4
    assert sorted(run.claimed.queue for run in started) == ["default", "default", "other", "other"]
    capped = make_worker(queues=["default", "other"], concurrency="default=3,other=1", max_in_flight=2)
    assert len(capped.run_once()) == 2


def test_async_bodies_run_on_the_event_loop() -> None:
    r = jobs.async_double.enqueue(n=21)
    drain()
    assert ops.get_job(r.id)["result"] == 42


def test_an_unencodable_result_is_terminal() -> None:
    r = jobs.bad_result.enqueue(key="b")
    drain()
    job = ops.get_job(r.id)
    assert (job["state"], job["error_code"], job["attempt"]) == ("dead", "X_JOB_RESULT_UNSERIALIZABLE", 1)


def test_a_timeout_cancels_the_token_then_fails_the_attempt() -> None:
    r = jobs.timeboxed.enqueue(key="t")
    drain()
    job = ops.get_job(r.id)
    assert (job["state"], job["attempt"], job["error_code"]) == ("dead", 2, "X_JOB_TIMEOUT")


def test_a_lapsed_lease_is_handed_back_and_the_attempt_counts(frozen_clock) -> None:
    r = jobs.noop.enqueue(key="lapse")
    Job.objects.filter(id=r.id).update(state="running", attempt=1, claimed_by="dead-worker",
                                       visible_at=frozen_clock.now() - timedelta(seconds=1))
    drain()
    job = ops.get_job(r.id)
    assert (job["state"], job["attempt"], job["error_code"]) == ("done", 2, None)  # no current failure
    assert [(a["outcome"], a["error_code"]) for a in job["attempts"]] == [("retried", "X_LEASE_LAPSED"),
                                                                           ("done", None)]


def test_a_lease_lapsing_on_the_final_attempt_dead_letters(frozen_clock, caplog) -> None:
    r = jobs.noop.enqueue(key="final")
    Job.objects.filter(id=r.id).update(state="running", attempt=3, max_attempts=3, claimed_by="dead-worker",
                                       visible_at=frozen_clock.now() - timedelta(seconds=1))
    with caplog.at_level("WARNING", logger="ultimate_jobs"):
        drain()
    job = ops.get_job(r.id)
    assert (job["state"], job["attempt"], job["stop_reason"]) == ("dead", 3, "lease-lapsed")
    assert "lease lapsed on the final attempt" in job["last_error"]
    # The seeds' name for a lapse the claim settles for good; a handed-back one is jobs.lease.rescued.
    assert f"jobs.claim.exhausted job_id={r.id} name=tests.noop queue=default now=dead" in caplog.text
    assert "jobs.lease.rescued" not in caplog.text


def test_a_live_lease_is_not_rescued(frozen_clock) -> None:
    r = jobs.noop.enqueue(key="alive")
    Job.objects.filter(id=r.id).update(state="running", attempt=1, claimed_by="busy-worker",
                                       visible_at=frozen_clock.now() + timedelta(seconds=5))
    drain()
    assert Job.objects.get(id=r.id).state == "running"


def test_settlement_is_fenced_on_the_claim_token(caplog, make_worker) -> None:
    r = jobs.noop.enqueue(key="fenced")
    worker = make_worker(queues=["default"])
    (run,) = worker.run_once()
    run.finished.wait(5)
    Job.objects.filter(id=r.id).update(state="cancelled")  # an operator cancelled it meanwhile
    with caplog.at_level(logging.WARNING, logger="ultimate_jobs"):
        worker.run_once()
    assert Job.objects.get(id=r.id).state == "cancelled"
    assert "jobs.settle.unowned" in caplog.text
    # A re-claimed row (new token) is just as safe from the old worker.
    r2 = jobs.noop.enqueue(key="fenced2")
    (run2,) = worker.run_once()
    run2.finished.wait(5)
    Job.objects.filter(id=r2.id).update(claim="01234567-89ab-7def-8123-456789abcdef")
    worker.run_once()
    assert Job.objects.get(id=r2.id).state == "running"


def test_the_heartbeat_renews_held_leases_and_cancels_lost_ones(frozen_clock, declare, make_worker) -> None:
    import threading

    release = threading.Event()

    @declare(idempotency_key="{k}", tenant=NO_TENANT)
    def held(ctx, *, k: str) -> str:
        release.wait(10)
        return ctx.cancelled.reason or "ok"

    kept, lost = held.enqueue(k="kept"), held.enqueue(k="lost")
    worker = make_worker(queues=["default"])
    worker.run_once()
    frozen_clock.advance(timedelta(seconds=20))
    Job.objects.filter(id=lost.id).update(state="cancelled")
    worker.heartbeat.beat()
    assert Job.objects.get(id=kept.id).visible_at == frozen_clock.now() + timedelta(seconds=30)
    assert worker.attempts[lost.id].token.reason == "X_JOB_LEASE_LOST"
    assert not worker.attempts[kept.id].token.is_set()
    release.set()
    _settle(worker)
    assert ops.get_job(kept.id)["result"] == "ok"
    assert Job.objects.get(id=lost.id).state == "cancelled"


def _settle(worker: Worker) -> None:
    for run in list(worker.attempts.values()):
        run.finished.wait(10)
    worker.holdings.collect()
    worker.settler.settle()


def test_a_claim_whose_answer_was_lost_is_handed_back_uncounted(make_worker) -> None:
    from ultimate_jobs.db import store_for

    r = jobs.noop.enqueue(key="lost-answer")
    worker = make_worker(queues=["default"])
    # The claim committed under this worker's id, but the worker never saw the answer.
    store_for().job_claim(queue="default", names=["tests.noop"], limit=10, worker_id=worker.worker_id,
                          visibility=30, now=None)
    assert Job.objects.get(id=r.id).state == "running"
    worker.claims.reconcile_due = True
    started = worker.run_once()
    assert [run.id for run in started] == [r.id]  # back to ready uncounted, then claimed again
    _settle(worker)
    row = Job.objects.get(id=r.id)
    assert (row.state, row.attempt) == ("done", 1)


def test_with_worker_drains_what_it_holds_on_exit_and_stops_its_threads(declare) -> None:
    import threading

    @declare(idempotency_key="{k}", tenant=NO_TENANT)
    def patient(ctx, *, k: str) -> str:
        ctx.cancelled.wait(10)  # runs until the drain cancels it
        return "returned"

    interrupted, done = patient.enqueue(k="held"), jobs.noop.enqueue(key="quick")
    before = set(threading.enumerate())
    with Worker(queues=["default"], drain_timeout=10) as worker:
        assert set(threading.enumerate()) <= before and worker.state == "idle"  # entering starts nothing
        assert {run.id for run in worker.run_once()} == {interrupted.id, done.id}
    assert worker.state == "stopped" and not worker.attempts
    assert worker.stats["settled"] == 2  # both settled at exit: the drained body returned normally
    assert Job.objects.get(id=interrupted.id).state == "done"
    assert Job.objects.get(id=done.id).state == "done"
    assert ops.get_job(interrupted.id)["result"] == "returned"
    assert not set(threading.enumerate()) - before  # its body threads are gone


def test_with_worker_around_run_on_another_thread_stops_it_on_exit() -> None:
    import threading

    with Worker(queues=["default"]) as worker:
        thread = threading.Thread(target=worker.run, kwargs={"install_signals": False})
        thread.start()
        assert wait_for(lambda: worker.state == "running")
    thread.join(10)
    assert not thread.is_alive() and worker.state == "stopped"


def test_the_with_worker_snippet_of_worker_md_runs(capsys: pytest.CaptureFixture[str]) -> None:
    page = (Path(__file__).resolve().parents[3] / "docs" / "reference" / "worker.md").read_text()
    snippet = page.split("## `with Worker(...) as worker`")[1].split("```python\n")[1].split("```")[0]
    jobs.noop.enqueue(key="snippet")
    exec(snippet, {})
    assert capsys.readouterr().out.splitlines() == ["started: 1", "stopped 1"]


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    import time

    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.mark.parametrize("slots", [1, 2])
def test_a_burst_worker_with_fewer_slots_than_queues_still_drains_the_last_queue(declare, slots: int,
                                                                                  make_worker) -> None:
    # A shared concurrency is split over the queues in rotation; a pass that offered the one busy
    # queue no slot must not count as "nothing runnable" and end the burst.
    @declare(name="tests.third_queue", queue="q3", idempotency_key="{n}", tenant=NO_TENANT)
    def third(ctx, *, n: int) -> int:
        return n * 7

    job = third.enqueue(n=6)
    stats = make_worker(queues=["q1", "q2", "q3"], concurrency=slots, burst=True).run(install_signals=False)
    assert (stats["claimed"], Job.objects.values_list("state", "result").get(id=job.id)) == (1, ("done", 42))
