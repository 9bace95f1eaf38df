"""Backfills under real worker processes: SIGKILL mid-sweep resumes at the page it stopped on,
SIGTERM mid-sweep drains without burning an attempt, and ``jobs_backfill --write --wait`` follows
a pass a worker runs."""

from __future__ import annotations

import json
import signal
from collections import Counter
from io import StringIO

import pytest
from django.core.management import call_command

from tests.app.jobs import slug_backfill
from tests.app.models import Effect, Post
from tests.process.conftest import Start, assert_stopped_with, log_text, wait_exit, wait_until
from ultimate_jobs import ops
from ultimate_jobs.models import BackfillRun, Job, JobStep

pytestmark = pytest.mark.process

ROWS, BATCH = 3000, 100  # tests.backfill.slugs pages 100 rows
SHORT_LEASE = {"JOBS_TEST_VISIBILITY": "2s"}
PACED = {"TEST_BACKFILL_RATE": "25"}  # 30 pages at 25/s: a sweep of more than a second to kill into


def seed_posts() -> list[int]:
    Post.objects.bulk_create([Post(title=f"post {i}") for i in range(ROWS)])
    return list(Post.objects.order_by("pk").values_list("pk", flat=True))


def pages_done(run_id: object) -> int:
    """Pages checkpointed so far (the ledger's running totals are written at most once a second)."""
    return JobStep.objects.filter(run_id=run_id, name__startswith="batch:", status="completed").count()


def test_a_sweep_killed_midway_resumes_at_its_page_on_another_worker(started_worker: Start) -> None:
    ids = seed_posts()
    victim = started_worker(env={**SHORT_LEASE, **PACED})
    enqueued = slug_backfill.enqueue()
    wait_until(lambda: pages_done(enqueued.run_id) >= 8, timeout=30, procs=(victim,), what="eight pages swept")
    victim.kill()
    assert victim.proc.returncode == -signal.SIGKILL
    done_before = {s.name for s in JobStep.objects.filter(run_id=enqueued.run_id, status="completed")}
    assert 8 <= len(done_before) < ROWS // BATCH, done_before
    assert BackfillRun.objects.get(run_id=enqueued.run_id).status == "running"

    rescuer = started_worker(env={**SHORT_LEASE, **PACED})
    wait_until(lambda: Job.objects.filter(id=enqueued.id, state="done").exists(), timeout=60,
               procs=(rescuer,), what="the resumed sweep done")

    assert not Post.objects.filter(slug="").exists()  # every row handled
    job = ops.get_job(enqueued.id)
    result, ledger = job["result"], job["backfill"]
    # The result and the ledger count the rows of checkpointed pages. A kill between a page's
    # UPDATE and its checkpoint takes those rows out of source (slug is no longer ""), so no later
    # page visits them again: they are handled, once, but counted by no page.
    uncounted = ROWS - result["rows"]
    assert uncounted in (0, BATCH), result
    pages = ROWS // BATCH - uncounted // BATCH
    assert job["attempt"] == 2 and result == {"name": slug_backfill.name, "batches": pages, "rows": ROWS - uncounted,
                                              "skipped": False, "previous_run_id": None}
    assert (ledger["status"], ledger["rows"], ledger["batches"], ledger["last_cursor"]) == (
        "completed", ROWS - uncounted, pages, ids[-1])
    assert BackfillRun.objects.filter(name=slug_backfill.name).count() == 1  # the retry adopted the row

    steps = {s["name"]: s for s in job["steps"]}
    assert set(steps) == {f"batch:{n}" for n in range(pages + 1)}  # the pages and the empty one that ends it
    for name in done_before:  # finished pages came back from storage: executed once, by the victim
        assert steps[name]["executions"] == 1, (name, steps[name])
    # Rows of those pages were handled once, by the victim; every row was handled at least once.
    effects = list(Effect.objects.filter(key__startswith="slug:").values_list("key", "pid"))
    assert {key for key, _ in effects} == {f"slug:{pk}" for pk in ids}
    per_row = Counter(key for key, _ in effects)
    before_pks = {pk for n in range(len(done_before)) for pk in ids[n * BATCH:(n + 1) * BATCH]}
    assert all(per_row[f"slug:{pk}"] == 1 for pk in before_pks)
    assert {pid for key, pid in effects if int(key[5:]) in before_pks} == {victim.pid}
    # At most the one page in flight at the kill ran twice.
    assert sum(per_row.values()) - ROWS <= BATCH
    assert "jobs.lease.rescued" in log_text(rescuer)


def test_a_kill_between_a_pages_writes_and_its_checkpoint_leaves_no_row_unhandled(started_worker: Start) -> None:
    ids = seed_posts()
    # The ninth page's handle has committed its UPDATE; the worker dies before the checkpoint.
    victim = started_worker(env={**SHORT_LEASE, "ULTIMATE_JOBS_FAULTS": "after_step_body_before_checkpoint=kill@9"})
    enqueued = slug_backfill.enqueue()
    code, _ = wait_exit(victim, timeout=30)
    assert code == -signal.SIGKILL
    assert pages_done(enqueued.run_id) == 8
    assert Post.objects.filter(slug="").count() == ROWS - 9 * BATCH  # page 8 was written, not checkpointed

    rescuer = started_worker(env=SHORT_LEASE)
    wait_until(lambda: Job.objects.filter(id=enqueued.id, state="done").exists(), timeout=60,
               procs=(rescuer,), what="the resumed sweep done")
    assert not Post.objects.filter(slug="").exists()
    job = ops.get_job(enqueued.id)
    # batch:8 ran again, from the same cursor, and found the next page: page 8's rows had left source.
    assert job["result"]["rows"] == ROWS - BATCH and job["result"]["batches"] == ROWS // BATCH - 1
    assert {s["name"]: s["output"] for s in job["steps"]}["batch:8"] == {"cursor": ids[9 * BATCH + 99],
                                                                        "rows": BATCH}
    per_row = Counter(Effect.objects.filter(key__startswith="slug:").values_list("key", flat=True))
    assert set(per_row) == {f"slug:{pk}" for pk in ids} and set(per_row.values()) == {1}  # each row once


def test_an_atomic_page_killed_before_its_checkpoint_rolls_back_and_every_row_is_counted(
        started_worker: Start) -> None:
    ids = seed_posts()
    atomic = {**SHORT_LEASE, "TEST_BACKFILL_ATOMIC": "1"}  # the workers declare the pass atomic=True
    victim = started_worker(env={**atomic, "ULTIMATE_JOBS_FAULTS": "after_step_body_before_checkpoint=kill@9"})
    enqueued = slug_backfill.enqueue()
    code, _ = wait_exit(victim, timeout=30)
    assert code == -signal.SIGKILL
    assert pages_done(enqueued.run_id) == 8
    assert Post.objects.filter(slug="").count() == ROWS - 8 * BATCH  # page 8's writes died with its transaction

    rescuer = started_worker(env=atomic)
    wait_until(lambda: Job.objects.filter(id=enqueued.id, state="done").exists(), timeout=60,
               procs=(rescuer,), what="the resumed sweep done")
    job = ops.get_job(enqueued.id)
    assert job["result"]["rows"] == ROWS and job["result"]["batches"] == ROWS // BATCH  # exact
    effects = Counter(Effect.objects.filter(key__startswith="slug:").values_list("key", flat=True))
    assert set(effects) == {f"slug:{pk}" for pk in ids} and set(effects.values()) == {1}  # each row once


def test_sigterm_mid_sweep_drains_without_burning_an_attempt(started_worker: Start) -> None:
    seed_posts()
    worker = started_worker(env={"TEST_BACKFILL_RATE": "5"})  # 200 ms between pages: SIGTERM lands in a wait
    enqueued = slug_backfill.enqueue()
    wait_until(lambda: pages_done(enqueued.run_id) >= 2, timeout=30, procs=(worker,), what="two pages swept")
    worker.signal(signal.SIGTERM)
    code, took = wait_exit(worker, timeout=15)
    assert code == 0 and took < 5, log_text(worker)
    row = Job.objects.get(id=enqueued.id)
    assert (row.state, row.attempt) == ("ready", 0)  # handed back uncounted, at once
    assert BackfillRun.objects.get(run_id=enqueued.run_id).status == "running"  # not a failure
    assert_stopped_with(worker, claimed=1, settled=0, interrupted=1)
    swept = pages_done(enqueued.run_id)

    finisher = started_worker()
    wait_until(lambda: Job.objects.filter(id=enqueued.id, state="done").exists(), timeout=60,
               procs=(finisher,), what="the drained sweep done")
    job = ops.get_job(enqueued.id)
    assert job["attempt"] == 1 and job["backfill"]["rows"] == ROWS
    executions = {s["name"]: s["executions"] for s in job["steps"]}
    assert all(executions[f"batch:{n}"] == 1 for n in range(swept))
    assert not Post.objects.filter(slug="").exists()


def test_write_wait_follows_the_pass_a_worker_runs(started_worker: Start) -> None:
    seed_posts()
    started_worker()
    out, err = StringIO(), StringIO()
    call_command("jobs_backfill", slug_backfill.name, "--write", "--wait", "--json", stdout=out, stderr=err)
    (outcome,) = json.loads(out.getvalue())["backfills"]
    assert outcome["final_state"] == "done" and outcome["rows"] == ROWS  # the gate counted what it would sweep
    assert outcome["result"]["rows"] == ROWS and outcome["backfill"]["status"] == "completed"
