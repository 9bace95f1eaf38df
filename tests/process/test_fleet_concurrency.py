"""Fleet concurrency across real worker processes: ``FleetSlot`` slots hold the cap between
processes, not only within one.

- ``concurrency=1``: twelve runs spread over two workers never overlap in time.
- ``Concurrency(key="{account}", limit=1, when_busy="fail")``: while worker A runs one account's
  job, the same account's next run, claimed by worker B, settles ``failed`` with
  ``X_JOB_KEY_BUSY`` without its body running; another account is not held up.
"""

from __future__ import annotations

import pytest
from django.db.models import Count

from tests.app.jobs import fleet_keyed_fail, fleet_overrun, fleet_serial
from tests.app.models import Effect
from tests.process.conftest import Start, job_states, log_text, wait_until
from ultimate_jobs import ops
from ultimate_jobs.models import Job
from ultimate_jobs.models.slots import FleetSlot

pytestmark = pytest.mark.process

RUNS = 12


def test_a_concurrency_1_job_never_overlaps_across_two_workers(started_worker: Start) -> None:
    workers = (started_worker(), started_worker())
    results = fleet_serial.enqueue_many([{"key": f"s{n:02d}", "seconds": 0.15} for n in range(RUNS)])
    ids = [r.id for r in results]

    wait_until(lambda: job_states(id__in=ids)["done"] == RUNS, timeout=60, procs=workers,
               what=f"{RUNS} concurrency=1 runs done")

    runs = sorted((ops.get_job(job_id)["result"] for job_id in ids), key=lambda r: r["started"])
    assert {r["pid"] for r in runs} <= {w.pid for w in workers}
    # The cap was contended (a pass claims several runs, all but one find the slot taken).
    assert any("jobs.slot.busy" in log_text(w) for w in workers)
    overlaps = [(a, b) for a, b in zip(runs, runs[1:], strict=False) if b["started"] < a["finished"]]
    assert overlaps == [], overlaps
    # Each body ran exactly once, and a busy key never cost a run an attempt or left an error.
    effects = Effect.objects.filter(key__startswith="serial:")
    per_key = dict(effects.values_list("key").annotate(n=Count("id")))
    assert per_key == {f"serial:s{n:02d}": 1 for n in range(RUNS)}
    rows = list(Job.objects.filter(id__in=ids).values_list("attempt", "last_error", "error_code"))
    assert set(rows) == {(1, None, None)}, rows
    # The slot rows are handed back when each body returns.
    assert not FleetSlot.objects.filter(concurrency_key="tests.fleet.serial").exists()


def test_a_busy_key_fails_the_run_another_worker_claimed_without_running_it(started_worker: Start) -> None:
    # Worker A has one slot: once it runs the holder it cannot claim the second run, B must.
    worker_a = started_worker("--concurrency", "1")
    holder = fleet_keyed_fail.enqueue(key="holder", account="acme", hold=60)
    wait_until(lambda: Effect.objects.filter(key="start:holder").exists(), timeout=20, procs=(worker_a,),
               what="the holder running in worker A")
    assert Effect.objects.get(key="start:holder").pid == worker_a.pid

    worker_b = started_worker()
    busy = fleet_keyed_fail.enqueue(key="second", account="acme")
    other = fleet_keyed_fail.enqueue(key="other-account", account="globex")
    procs = (worker_a, worker_b)
    wait_until(lambda: Job.objects.filter(id=busy.id, state="failed").exists(), timeout=20, procs=procs,
               what="the same account's second run failed")
    job = ops.get_job(busy.id)
    assert (job["state"], job["error_code"], job["stop_reason"], job["attempt"]) == (
        "failed", "X_JOB_KEY_BUSY", "key-busy", 1), job
    assert f":{worker_b.pid}:" in Job.objects.get(id=busy.id).claimed_by
    assert "acme" in job["last_error"]
    assert not Effect.objects.filter(key__in=("start:second", "done:second")).exists()  # the body never ran
    assert f"jobs.slot.busy job_id={busy.id}" in log_text(worker_b)

    # Another account is not held up by acme's slot; the holder is still running meanwhile.
    wait_until(lambda: Job.objects.filter(id=other.id, state="done").exists(), timeout=20, procs=procs,
               what="another account's run done")
    assert Job.objects.get(id=holder.id).state == "running"

    # Released, the holder finishes, and acme's key is free again for the next run.
    Effect.objects.create(key="release:holder")
    wait_until(lambda: Job.objects.filter(id=holder.id, state="done").exists(), timeout=20, procs=procs,
               what="the holder done once released")
    after = fleet_keyed_fail.enqueue(key="after", account="acme")
    wait_until(lambda: Job.objects.filter(id=after.id, state="done").exists(), timeout=20, procs=procs,
               what="acme's next run done once the key is free")
    assert [e.key for e in Effect.objects.filter(key__endswith=":holder").order_by("id")] == [
        "start:holder", "release:holder", "done:holder"]


def test_a_timed_out_body_that_runs_on_keeps_its_slot_until_it_returns(started_worker: Start) -> None:
    worker = started_worker(env={"JOBS_TEST_VISIBILITY": "2s"})  # slot TTL 2 s, renewed every ~0.67 s
    deaf = fleet_overrun.enqueue(key="deaf", group="g1", seconds=7)  # timeout=1s, ignores the cancel
    wait_until(lambda: Effect.objects.filter(key="start:deaf").exists(), timeout=20, procs=(worker,),
               what="the deaf body running")
    nxt = fleet_overrun.enqueue(key="next", group="g1")
    wait_until(lambda: Job.objects.filter(id=nxt.id, state="done").exists()
               and Effect.objects.filter(key="end:deaf").exists(), timeout=30, procs=(worker,),
               what="both bodies returned")
    assert Job.objects.get(id=deaf.id).state == "dead"  # its timeout failed its only attempt
    assert "jobs.timeout job_id=" in log_text(worker)
    deaf_end = Effect.objects.values_list("created_at", flat=True).get(key="end:deaf")
    next_start = Effect.objects.values_list("created_at", flat=True).get(key="start:next")
    # One slot for group g1: the next run may start only once the deaf body has returned.
    assert next_start >= deaf_end, (f"the next run started {(deaf_end - next_start).total_seconds():.1f}s "
                                    "before the timed-out body returned")
