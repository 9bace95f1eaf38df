"""No value from a job body stops a worker settling the others: an exception whose ``code`` is not
an ``X_`` code (over the column's 64 characters, a NUL, lower case) settles as ``X_JOB_FAILED`` with
the original named in the error text, and the jobs beside it in the same batch settle too. Before
the fix one such code failed the batched settle on PostgreSQL, and the worker sent the same batch
again every pass, settling nothing else."""

from __future__ import annotations

import pytest

from tests.app.jobs import coded, coded_nul, record
from tests.app.models import Effect
from tests.process.conftest import Start, job_states, wait_until
from ultimate_jobs.models import Job

pytestmark = pytest.mark.process

LONG_CODE = "X_" + "TOO_LONG_" * 10  # 92 characters: past the 64-character column


def test_unstorable_exception_codes_settle_generic_and_never_hold_back_the_batch(started_worker: Start) -> None:
    long = coded.enqueue(key="long", code=LONG_CODE)
    lower = coded.enqueue(key="lower", code="x_not-a-code")
    nul = coded_nul.enqueue(key="nul")
    beside = record.enqueue_many([{"key": f"beside-{n}"} for n in range(30)])

    worker = started_worker("--concurrency", "10")
    wait_until(lambda: job_states(name="tests.record") == {"done": 30}, timeout=30, procs=(worker,),
               what="the 30 jobs beside the bad codes done")
    wait_until(lambda: Job.objects.filter(id__in=[long.id, lower.id], attempt__gte=1).exclude(
        state="running").count() == 2 and Job.objects.filter(id=nul.id, state="dead").exists(),
        timeout=30, procs=(worker,), what="the three coded jobs settled")

    assert sorted(Effect.objects.filter(key__startswith="beside-").values_list("key", flat=True)) == sorted(
        f"beside-{n}" for n in range(30))
    assert {r.id for r in beside} == set(Job.objects.filter(name="tests.record", state="done")
                                         .values_list("id", flat=True))
    for job_id, original in ((long.id, LONG_CODE), (lower.id, "x_not-a-code")):
        row = Job.objects.get(id=job_id)
        assert row.error_code == "X_JOB_FAILED"
        assert repr(original) in row.last_error  # the original named in the stored text
        assert f"coded failure {original}" in row.last_error
    dead = Job.objects.get(id=nul.id)
    assert dead.error_code == "X_JOB_FAILED"
    assert "X_NUL\\x00NUL" in dead.last_error and "\x00" not in dead.last_error
    assert dead.stop_reason == "attempts-exhausted"
