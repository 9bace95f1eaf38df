"""A worker killed with SIGKILL mid-job: its lease lapses, another worker reclaims the job, and
a lapse on the final attempt dead-letters the job (``lease-lapsed``) instead of running it forever."""

from __future__ import annotations

import signal
import time
from collections import Counter
from collections.abc import Callable

import pytest
from django.utils import timezone

from tests.app.jobs import record, slow
from tests.app.models import Effect
from tests.conftest import WorkerProcess
from tests.process.conftest import Start, assert_stopped_with, log_text, wait_exit, wait_until
from ultimate_jobs import NO_TENANT, Retry, ops
from ultimate_jobs.models import Job

pytestmark = pytest.mark.process

# A short lease for these processes only: heartbeats every ~0.67 s, a dead worker's job is
# claimable again ~2 s after its last renewal.
SHORT_LEASE = {"JOBS_TEST_VISIBILITY": "2s"}


def starts(key: str) -> list[Effect]:
    return list(Effect.objects.filter(key=f"start:{key}").order_by("attempt", "id"))


def wait_for_start(key: str, attempt: int, procs: tuple[WorkerProcess, ...]) -> Effect:
    return wait_until(lambda: Effect.objects.filter(key=f"start:{key}", attempt=attempt).first(), timeout=20,
                      procs=procs, what=f"start:{key} attempt {attempt}")


def sigkill(proc: WorkerProcess) -> None:
    proc.kill()  # SIGKILL: no drain, no settle, no goodbye; its lease is all that is left
    assert proc.proc.returncode == -signal.SIGKILL


def test_job_of_a_killed_worker_is_reclaimed_after_its_lease_and_finishes(
        started_worker: Start) -> None:
    victim = started_worker(env=SHORT_LEASE)
    result = slow.enqueue(key="crash", seconds=3)
    first = wait_for_start("crash", 1, (victim,))
    assert first.pid == victim.pid

    rescuer = started_worker(env=SHORT_LEASE)
    held = Job.objects.get(id=result.id)
    assert (held.state, held.attempt) == ("running", 1)
    assert f":{victim.pid}:" in held.claimed_by
    lease_expiry_seen = held.visible_at  # the lease can only have been renewed past this since
    sigkill(victim)

    wait_until(lambda: Job.objects.filter(id=result.id, state="done").exists(), timeout=30, procs=(rescuer,),
               what="the reclaimed job done")
    job = ops.get_job(result.id)
    assert job["state"] == "done"
    assert job["attempt"] == 2  # the killed attempt is counted
    assert job["result"] == "crash"
    assert job["stop_reason"] is None

    begun = starts("crash")
    assert [(e.attempt, e.pid) for e in begun] == [(1, victim.pid), (2, rescuer.pid)]
    # Not reclaimed while the dead worker's lease still stood.
    assert begun[1].created_at >= lease_expiry_seen
    finished = list(Effect.objects.filter(key="done:crash"))
    assert [(e.attempt, e.pid) for e in finished] == [(2, rescuer.pid)]
    assert "jobs.lease.rescued" in log_text(rescuer)


def test_a_lease_lapsing_on_the_final_attempt_dead_letters_the_job(
        started_worker: Start) -> None:
    # tests.slow has 3 attempts; every worker that claims it is killed mid-body.
    holder = started_worker(env=SHORT_LEASE)
    result = slow.enqueue(key="doomed", seconds=120)
    assert Job.objects.get(id=result.id).max_attempts == 3
    killed = []
    for attempt in (1, 2, 3):
        began = wait_for_start("doomed", attempt, (holder,))
        assert began.pid == holder.pid
        successor = started_worker(env=SHORT_LEASE)  # warm, so it reclaims as soon as the lease lapses
        sigkill(holder)
        killed.append(holder.pid)
        holder = successor

    survivor = holder
    wait_until(lambda: Job.objects.filter(id=result.id).exclude(state="running").first(), timeout=20,
               procs=(survivor,), what="the lapsed final attempt settled")
    job = ops.get_job(result.id)
    assert job["state"] == "dead"
    assert job["stop_reason"] == "lease-lapsed"
    assert job["attempt"] == 3
    assert job["error_code"] == "X_LEASE_LAPSED"
    assert "final attempt" in job["last_error"]
    assert job["finished_at"] is not None

    # Never re-run: the survivor keeps working (a job enqueued after runs) and the doomed one stays dead.
    after = record.enqueue(key="after-dead-letter")
    wait_until(lambda: Job.objects.filter(id=after.id, state="done").exists(), timeout=20, procs=(survivor,),
               what="a job enqueued after the dead letter done")
    assert [(e.attempt, e.pid) for e in starts("doomed")] == list(zip((1, 2, 3), killed, strict=True))
    assert not Effect.objects.filter(key="done:doomed").exists()
    assert Job.objects.get(id=result.id).state == "dead"


def test_a_stalled_worker_cannot_overwrite_the_job_another_worker_reclaimed(
        started_worker: Start) -> None:
    stalled = started_worker(env=SHORT_LEASE)
    result = slow.enqueue(key="stall", seconds=3)
    wait_for_start("stall", 1, (stalled,))
    rescuer = started_worker(env=SHORT_LEASE)

    stalled.signal(signal.SIGSTOP)  # a paused VM, a stop-the-world stall: alive, holding the run, silent
    try:
        wait_until(lambda: Job.objects.filter(id=result.id, state="done").exists(), timeout=30,
                   procs=(rescuer,), what="the job reclaimed from the stalled worker done")
        settled = Job.objects.values().get(id=result.id)
    finally:
        stalled.signal(signal.SIGCONT)
    assert settled["attempt"] == 2 and f":{rescuer.pid}:" in settled["claimed_by"]

    # The stalled worker wakes, finds the run is no longer its own, and writes nothing to the row.
    wait_until(lambda: any(event in log_text(stalled) for event in ("jobs.settle.unowned", "jobs.lease.lost")),
               timeout=15, procs=(stalled,), what="the stalled worker noticed it lost the run")
    stalled.signal(signal.SIGTERM)
    code, _ = wait_exit(stalled, timeout=15)
    assert code == 0, log_text(stalled)
    assert_stopped_with(stalled, claimed=1, settled=0, interrupted=0, lost=1)
    assert Job.objects.values().get(id=result.id) == settled
    assert [(e.attempt, e.pid) for e in starts("stall")] == [(1, stalled.pid), (2, rescuer.pid)]
    assert (2, rescuer.pid) in set(Effect.objects.filter(key="done:stall").values_list("attempt", "pid"))


# A second deployment's workers: they also register tests.extra.* (see tests/app/jobs.py).
EXTRA_DEPLOYMENT = {**SHORT_LEASE, "JOBS_TEST_DEPLOY_EXTRA": "1"}


def test_a_worker_without_a_jobs_code_does_not_decide_its_lapsed_final_attempt(
        started_worker: Start, declare: Callable[..., object]) -> None:
    # The same declaration as the extra deployment's, so this process can enqueue it.
    @declare(name="tests.extra.slow_no_dead_letter", idempotency_key="extra-ndl:{key}", tenant=NO_TENANT,
             retry=Retry(attempts=1, dead_letter=False))
    def extra_slow_no_dead_letter(ctx: object, *, key: str, seconds: float) -> str:
        raise AssertionError("runs only in the extra deployment's workers")

    with_code = started_worker(env=EXTRA_DEPLOYMENT)
    result = extra_slow_no_dead_letter.enqueue(key="ndl", seconds=120)  # type: ignore[attr-defined]
    began = wait_for_start("ndl", 1, (with_code,))
    assert began.pid == with_code.pid
    without_code = started_worker(env=SHORT_LEASE)
    sigkill(with_code)  # dies holding the job's only attempt

    # The lease lapses while only a worker without the job's code runs; give it time for its
    # lapsed-lease rescue passes (one a second).
    wait_until(lambda: Job.objects.filter(id=result.id, visible_at__lt=timezone.now()).exists(), timeout=10,
               procs=(without_code,), what="the killed worker's lease lapsed")
    time.sleep(2.0)

    # A worker of the job's own deployment comes back and settles the lapse by the job's policy.
    started_worker(env=EXTRA_DEPLOYMENT)
    wait_until(lambda: Job.objects.filter(id=result.id).exclude(state="running").exists(), timeout=20,
               procs=(without_code,), what="the lapsed final attempt settled")
    job = ops.get_job(result.id)
    assert (job["state"], job["stop_reason"], job["attempt"]) == ("failed", "lease-lapsed", 1), (
        job["state"], log_text(without_code))


def test_a_worker_killed_mid_drain_loses_no_job(started_worker: Start) -> None:
    total = 600
    victim, survivor = started_worker(env=SHORT_LEASE), started_worker(env=SHORT_LEASE)
    results = record.enqueue_many([{"key": f"m{n:04d}", "sleep": 0.05} for n in range(total)])
    wait_until(lambda: Effect.objects.filter(pid=victim.pid).count() >= 50, timeout=30,
               procs=(victim, survivor), what="the victim busy draining")
    sigkill(victim)  # with up to 10 bodies in flight

    wait_until(lambda: Job.objects.filter(state="done").count() == total, timeout=60, procs=(survivor,),
               what=f"all {total} jobs done after the kill")
    assert Job.objects.exclude(state="done").count() == 0
    effects = Counter(Effect.objects.values_list("key", flat=True))
    assert set(effects) == {f"m{n:04d}" for n in range(total)}  # every body ran
    # Only the victim's in-flight jobs ran again (at-least-once), each as its second, counted attempt.
    rerun = {key for key, in Job.objects.filter(attempt=2).values_list("payload__key")}
    assert 1 <= len(rerun) <= 10, rerun
    assert not Job.objects.filter(attempt__gt=2).exists()
    assert {key for key, n in effects.items() if n > 1} <= rerun
    assert max(effects.values()) <= 2
    second_runs = Effect.objects.filter(key__in=rerun, attempt=2)
    assert set(second_runs.values_list("pid", flat=True)) == {survivor.pid}
    assert set(Job.objects.values_list("id", flat=True)) == {r.id for r in results}
