"""Durable ``async def`` runs across real ``jobs_worker`` processes, the twins of
``test_durable_runs.py``: a sleep resumed by another process, a publish waking a waiting run,
SIGKILLs at the step fault points (``atomic=True`` with a ``def``, ``once=True`` with an ``async
def``, the unwind, an ambiguous commit) and mid-step, SIGTERM mid-step (the drain: back to
``ready`` uncounted), and a replay after a failure. Both databases."""

from __future__ import annotations

import signal

import pytest
from django.db import transaction

from tests.app import async_step_jobs as jobs
from tests.app.models import Effect
from tests.conftest import WorkerProcess
from tests.process.conftest import Start, log_text, wait_exit
from tests.process.test_durable_runs import SHORT_LEASE, faulty, killed, pids, state, until
from ultimate_jobs import ops, publish_event
from ultimate_jobs.models import Job

pytestmark = pytest.mark.process


def keys(prefix: str) -> list[str]:
    return list(Effect.objects.filter(key__startswith=prefix).order_by("id").values_list("key", flat=True))


def started(key: str, procs: tuple[WorkerProcess, ...]) -> None:
    until(lambda: Effect.objects.filter(key=f"long-start:{key}").exists(), procs, "the long step started")


def test_an_async_sleep_is_resumed_by_another_worker_process(worker_process: Start) -> None:
    first = worker_process()
    result = jobs.sleeper.enqueue(key="s", seconds=2)
    until(lambda: state(result.id) == "suspended", (first,), "the run suspended")
    row = Job.objects.get(id=result.id)
    assert row.attempt == 0  # the sleep handed its attempt back
    first.signal(signal.SIGTERM)
    assert first.wait(30) == 0
    second = worker_process()
    until(lambda: state(result.id) == "done", (second,), "the run resumed and finished")
    job = ops.get_job(result.id)
    assert job["result"] == {"pid": second.pid, "attempt": 1}
    assert pids("before:s") == [first.pid] and pids("after:s") == [second.pid]
    assert Effect.objects.get(key="after:s").created_at >= row.run_at  # not before the wake time
    assert [s["status"] for s in job["steps"]] == ["completed"] * 3


def test_a_publish_wakes_a_waiting_async_run(worker_process: Start) -> None:
    worker = worker_process()
    result = jobs.waiter.enqueue(key="live")
    until(lambda: state(result.id) == "suspended", (worker,), "the waiter suspended")
    with transaction.atomic():
        publish_event("tests.reply", {"key": "someone-else"})
    with transaction.atomic():
        publish_event("tests.reply", {"key": "live", "n": 1})
    until(lambda: state(result.id) == "done", (worker,), "the waiter woken by the publish", timeout=10)
    assert ops.get_job(result.id)["result"] == {"key": "live", "n": 1}
    assert pids("after-wait:live") == [worker.pid]


@pytest.mark.parametrize("point", ["after_step_body_before_checkpoint", "after_checkpoint_commit"])
def test_an_atomic_def_step_killed_before_or_after_commit_leaves_exactly_one_effect_row(
        worker_process: Start, point: str) -> None:
    victim = worker_process(env=faulty(f"{point}=kill@1"))  # the first hit is the step "write"
    result = jobs.atomic_write.enqueue(key="k")
    killed(victim, point)
    assert Effect.objects.filter(key="atomic:k").count() == (0 if "before" in point else 1)
    rescuer = worker_process(env=SHORT_LEASE)
    until(lambda: state(result.id) == "done", (rescuer,), "the run finished by another worker")
    assert pids("atomic:k") == ([rescuer.pid] if "before" in point else [victim.pid])
    job = ops.get_job(result.id)
    assert [(s["name"], s["executions"]) for s in job["steps"]] == [("write", 1), ("after", 1)]
    assert job["attempt"] == 2


def test_an_async_once_step_killed_between_started_and_completed_is_unknown_until_resolved(
        worker_process: Start) -> None:
    victim = worker_process(env=faulty("before_step_body=kill@1"))  # "charge", its started stored
    result = jobs.once_charge.enqueue(key="k")
    killed(victim, "before_step_body")
    rescuer = worker_process(env=SHORT_LEASE)
    until(lambda: state(result.id) == "dead", (rescuer,), "the unknown outcome stops the run")
    job = ops.get_job(result.id)
    assert (job["error_code"], job["stop_reason"], job["steps"][0]["status"]) == (
        "X_STEP_OUTCOME_UNKNOWN", "terminal", "started")
    assert not Effect.objects.filter(key="once-charge:k").exists()  # fn never called again

    ops.resolve_step(result.id, "charge", ran=True, output={"id": "ch-k", "checked": "by hand"})
    ops.retry_job(result.id)
    until(lambda: state(result.id) == "done", (rescuer,), "the retried run finished")
    assert ops.get_job(result.id)["result"] == {"id": "ch-k", "checked": "by hand"}
    assert pids("receipt:k") == [rescuer.pid] and not Effect.objects.filter(key="once-charge:k").exists()


def test_a_crash_mid_unwind_continues_the_unwind_on_the_next_claim(worker_process: Start) -> None:
    # Checkpoints in that process: charge (1), reserve (2), then the unwind's compensate:reserve (3).
    victim = worker_process(env=faulty("after_checkpoint_commit=kill@3"))
    result = jobs.checkout.enqueue(order="o")
    killed(victim, "compensate:reserve")
    assert keys("") == ["charge:o", "reserve:o", "ship-try:o", "ship-try:o", "ship-try:o", "release:rs-o"]
    rescuer = worker_process(env=SHORT_LEASE)
    until(lambda: state(result.id) == "dead", (rescuer,), "the unwind finished on the next claim")
    job = ops.get_job(result.id)
    assert (job["attempt"], job["error_code"]) == (4, "X_JOB_FAILED")  # the original failure
    assert pids("release:rs-o") == [victim.pid] and pids("refund:ch-o") == [rescuer.pid]  # LIFO, async refund
    assert len(keys("ship-try")) == 3  # never the forward path again
    assert [s["name"] for s in job["steps"]] == ["charge", "reserve", "ship", "unwinding", "compensate:reserve",
                                                 "compensate:charge"]


def test_an_ambiguous_commit_does_not_run_the_async_step_again(worker_process: Start) -> None:
    worker = worker_process(env={"ULTIMATE_JOBS_FAULTS": "after_checkpoint_commit=raise@1"})
    result = jobs.plain.enqueue(key="amb")
    until(lambda: state(result.id) == "done", (worker,), "the retried run finished")
    job = ops.get_job(result.id)
    assert job["attempt"] == 2 and job["last_error"] is None  # done: the failure lives in the history
    assert "FaultInjected" in job["attempts"][0]["error"]
    assert pids("first:amb") == [worker.pid] and pids("second:amb") == [worker.pid]
    assert [(s["name"], s["executions"]) for s in job["steps"]] == [("first", 1), ("second", 1)]


def test_a_failed_async_step_is_retried_alone_by_a_real_worker(worker_process: Start) -> None:
    worker = worker_process()
    result = jobs.onboard.enqueue(org="acme", nudge_failures=1)
    until(lambda: state(result.id) == "done", (worker,), "the run finished on its second attempt")
    job = ops.get_job(result.id)
    assert (job["attempt"], job["result"]) == (2, {"org": "org-acme"})
    assert keys("") == ["provision:acme", "welcome:acme", "nudge-try:acme", "nudge-try:acme"]
    assert [(s["name"], s["executions"]) for s in job["steps"]] == [("provision", 1), ("welcome-email", 1),
                                                                    ("nudge", 2)]


def test_kill_9_mid_async_step_reruns_only_that_step_on_another_worker(worker_process: Start) -> None:
    victim = worker_process(env=SHORT_LEASE)
    result = jobs.long_step.enqueue(key="k9", seconds=60)
    started("k9", (victim,))
    victim.kill()
    rescuer = worker_process(env=SHORT_LEASE)
    until(lambda: state(result.id) == "done", (rescuer,), "the run finished by another worker")
    job = ops.get_job(result.id)
    assert job["attempt"] == 2  # the lapsed lease counts the attempt
    assert keys("") == ["first:k9", "long-start:k9", "long-start:k9", "long-end:k9", "last:k9"]
    assert pids("first:k9") == [victim.pid] and pids("long-end:k9") == [rescuer.pid]


def test_sigterm_mid_async_step_cancels_it_and_drains_the_run_back_uncounted(worker_process: Start) -> None:
    worker = worker_process()
    result = jobs.long_step.enqueue(key="t", seconds=60)
    started("t", (worker,))
    worker.signal(signal.SIGTERM)
    code, took = wait_exit(worker, timeout=20)
    assert code == 0, log_text(worker)
    assert took < 5, f"the awaited step was cancelled at its await, yet the drain took {took:.2f}s"
    row = Job.objects.get(id=result.id)
    assert (row.state, row.attempt, row.stop_reason) == ("ready", 0, None)  # interrupted: not counted
    assert [s["name"] for s in ops.get_job(result.id)["steps"]] == ["first"]  # nothing stored for "long"
    second = worker_process()
    until(lambda: state(result.id) == "done", (second,), "the run finished by the next worker")
    assert Job.objects.get(id=result.id).attempt == 1
    assert keys("") == ["first:t", "long-start:t", "long-start:t", "long-end:t", "last:t"]  # first replayed


def test_sigterm_mid_def_step_lets_it_finish_and_keeps_its_checkpoint(worker_process: Start) -> None:
    worker = worker_process()
    result = jobs.long_step.enqueue(key="d", seconds=2, blocking=True)
    started("d", (worker,))
    worker.signal(signal.SIGTERM)
    code, _ = wait_exit(worker, timeout=20)
    assert code == 0, log_text(worker)
    row = Job.objects.get(id=result.id)
    assert (row.state, row.attempt) == ("ready", 0)  # interrupted: not counted
    assert [(s["name"], s["status"]) for s in ops.get_job(result.id)["steps"]] == [
        ("first", "completed"), ("long", "completed")]  # the drain waited for the thread and kept its step
    second = worker_process()
    until(lambda: state(result.id) == "done", (second,), "the run finished by the next worker")
    assert keys("") == ["first:d", "long-start:d", "long-end:d", "last:d"]  # nothing ran twice
    assert pids("long-end:d") == [worker.pid] and pids("last:d") == [second.pid]


def test_an_operator_cancel_cancels_the_awaiting_async_body_at_once(worker_process: Start) -> None:
    worker = worker_process("--concurrency", "1", env={"JOBS_TEST_VISIBILITY": "3s"})  # heartbeats each second
    result = jobs.long_step.enqueue(key="c", seconds=120)
    started("c", (worker,))
    answer = ops.cancel_job(result.id, reason="runaway")
    assert answer["state"] == "cancelled"
    # The heartbeat finds the row gone from this worker, sets the token, and the body's task is
    # cancelled at its await: its one slot is free again long before the 120 s step would end.
    until(lambda: f"jobs.run.cancelled job_id={result.id}" in log_text(worker), (worker,), "the body stopped")
    after = jobs.plain.enqueue(key="after-cancel")
    until(lambda: state(after.id) == "done", (worker,), "the next job ran in the freed slot", timeout=20)
    assert not Effect.objects.filter(key__in=("long-end:c", "last:c")).exists()
    job = ops.get_job(result.id)
    assert (job["state"], job["stop_reason"], job["result"]) == ("cancelled", "cancelled", None)
    assert [s["name"] for s in job["steps"]] == ["first"]
