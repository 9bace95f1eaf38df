"""Durable runs across real ``jobs_worker`` processes: a sleep resumed by another process, a
publish waking a waiting worker, and SIGKILLs at the step fault points (``ULTIMATE_JOBS_FAULTS``)
for ``atomic=True``, ``once=True``, the unwind and an ambiguous commit. Both databases."""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

import pytest
from django.db import transaction

from tests.app import step_jobs
from tests.app.models import Effect
from tests.conftest import WorkerProcess, wait_for
from ultimate_jobs import ops, publish_event
from ultimate_jobs.models import Job

pytestmark = pytest.mark.process

SHORT_LEASE = {"JOBS_TEST_VISIBILITY": "2s"}  # a killed worker's job is claimable ~2 s later
Start = Callable[..., WorkerProcess]


def faulty(spec: str) -> dict[str, str]:
    return {**SHORT_LEASE, "ULTIMATE_JOBS_FAULTS": spec}


def until(predicate: Callable[[], Any], procs: tuple[WorkerProcess, ...], what: str, timeout: float = 30) -> Any:
    try:
        return wait_for(predicate, timeout=timeout)
    except AssertionError:
        logs = "\n".join(f"--- pid={p.pid} rc={p.proc.poll()} ---\n" + "\n".join(p.output().splitlines()[-25:])
                         for p in procs)
        raise AssertionError(f"not within {timeout}s: {what}\n{logs}") from None


def state(job_id: Any) -> str:
    return Job.objects.get(id=job_id).state


def killed(proc: WorkerProcess, what: str) -> None:
    until(lambda: proc.proc.poll() is not None, (proc,), f"the worker killed at {what}")
    assert proc.proc.returncode == -signal.SIGKILL, proc.output()
    assert "jobs.fault.struck" in proc.output()


def pids(key: str) -> list[int]:
    return list(Effect.objects.filter(key=key).order_by("id").values_list("pid", flat=True))


def test_a_sleeping_run_is_resumed_by_another_worker_process_after_its_wake_time(worker_process: Start) -> None:
    first = worker_process()
    result = step_jobs.sleeper.enqueue(key="s", seconds=2)
    until(lambda: state(result.id) == "suspended", (first,), "the run suspended")
    row = Job.objects.get(id=result.id)
    assert row.attempt == 0  # the sleep handed its attempt back (retry=1 survives it)
    first.signal(signal.SIGTERM)
    assert first.wait(30) == 0
    second = worker_process()
    until(lambda: state(result.id) == "done", (second,), "the run resumed and finished")
    job = ops.get_job(result.id)
    assert job["result"] == {"pid": second.pid, "attempt": 1}
    assert pids("before:s") == [first.pid] and pids("after:s") == [second.pid]
    assert Effect.objects.get(key="after:s").created_at >= row.run_at  # not before the wake time
    assert [s["status"] for s in job["steps"]] == ["completed"] * 3


def test_a_publish_wakes_a_waiting_run_in_a_real_worker(worker_process: Start) -> None:
    worker = worker_process()
    result = step_jobs.waiter.enqueue(key="live")
    until(lambda: state(result.id) == "suspended", (worker,), "the waiter suspended")
    with pytest.raises(RuntimeError), transaction.atomic():
        publish_event("tests.reply", {"key": "live", "n": 0})
        raise RuntimeError("rolled back")
    with transaction.atomic():
        publish_event("tests.reply", {"key": "someone-else"})
    with transaction.atomic():
        publish_event("tests.reply", {"key": "live", "n": 1})
    # Well inside the backstop poll (15 min on PostgreSQL, 30 s on SQLite): the publish woke it.
    until(lambda: state(result.id) == "done", (worker,), "the waiter woken by the publish", timeout=10)
    assert ops.get_job(result.id)["result"] == {"key": "live", "n": 1}


@pytest.mark.parametrize("point", ["after_step_body_before_checkpoint", "after_checkpoint_commit"])
def test_atomic_step_killed_before_or_after_commit_leaves_exactly_one_effect_row(
        worker_process: Start, point: str) -> None:
    victim = worker_process(env=faulty(f"{point}=kill@1"))  # the first hit is the step "write"
    result = step_jobs.atomic_write.enqueue(key="k")
    killed(victim, point)
    # Before the commit the body's row died with the connection; after it, it is stored with the step.
    assert Effect.objects.filter(key="atomic:k").count() == (0 if "before" in point else 1)
    rescuer = worker_process(env=SHORT_LEASE)
    until(lambda: state(result.id) == "done", (rescuer,), "the run finished by another worker")
    assert pids("atomic:k") == ([rescuer.pid] if "before" in point else [victim.pid])
    job = ops.get_job(result.id)
    assert [(s["name"], s["executions"]) for s in job["steps"]] == [("write", 1), ("after", 1)]
    assert job["attempt"] == 2


def test_once_killed_between_started_and_completed_is_unknown_until_resolved(worker_process: Start) -> None:
    victim = worker_process(env=faulty("before_step_body=kill@1"))  # "charge", its started stored
    result = step_jobs.once_charge.enqueue(key="k")
    killed(victim, "before_step_body")
    rescuer = worker_process(env=SHORT_LEASE)
    until(lambda: state(result.id) == "dead", (rescuer,), "the unknown outcome stops the run")
    job = ops.get_job(result.id)
    assert (job["error_code"], job["stop_reason"]) == ("X_STEP_OUTCOME_UNKNOWN", "terminal")
    assert job["steps"][0]["status"] == "started"
    assert not Effect.objects.filter(key="once-charge:k").exists()  # fn never called again

    ops.resolve_step(result.id, "charge", ran=True, output={"id": "ch-k", "checked": "by hand"})
    ops.retry_job(result.id)
    until(lambda: state(result.id) == "done", (rescuer,), "the retried run finished")
    assert ops.get_job(result.id)["result"] == {"id": "ch-k", "checked": "by hand"}
    assert pids("receipt:k") == [rescuer.pid] and not Effect.objects.filter(key="once-charge:k").exists()


def test_a_crash_mid_unwind_continues_the_unwind_on_the_next_claim(worker_process: Start) -> None:
    # Checkpoints in that process: charge (1), reserve (2), then the unwind's compensate:reserve (3).
    victim = worker_process(env=faulty("after_checkpoint_commit=kill@3"))
    result = step_jobs.checkout.enqueue(order="o")
    killed(victim, "compensate:reserve")
    assert [k for k in Effect.objects.order_by("id").values_list("key", flat=True)] == [
        "charge:o", "reserve:o", "ship-try:o", "ship-try:o", "ship-try:o", "release:rs-o"]
    rescuer = worker_process(env=SHORT_LEASE)
    until(lambda: state(result.id) == "dead", (rescuer,), "the unwind finished on the next claim")
    job = ops.get_job(result.id)
    assert (job["attempt"], job["error_code"]) == (4, "X_JOB_FAILED")  # the original failure
    assert pids("release:rs-o") == [victim.pid] and pids("refund:ch-o") == [rescuer.pid]
    assert Effect.objects.filter(key__startswith="ship-try").count() == 3  # never the forward path again
    assert [s["name"] for s in job["steps"]] == ["charge", "reserve", "ship", "unwinding", "compensate:reserve",
                                                 "compensate:charge"]


def test_an_ambiguous_commit_does_not_run_the_step_again(worker_process: Start) -> None:
    # FaultInjected (an OperationalError) right after the first checkpoint's COMMIT.
    worker = worker_process(env={"ULTIMATE_JOBS_FAULTS": "after_checkpoint_commit=raise@1"})
    result = step_jobs.plain.enqueue(key="amb")
    until(lambda: state(result.id) == "done", (worker,), "the retried run finished")
    job = ops.get_job(result.id)
    assert job["attempt"] == 2 and job["last_error"] is None  # done: the failure is in its attempts
    assert "FaultInjected" in job["attempts"][0]["error"]  # an OperationalError
    assert pids("first:amb") == [worker.pid] and pids("second:amb") == [worker.pid]
    assert [(s["name"], s["executions"]) for s in job["steps"]] == [("first", 1), ("second", 1)]
