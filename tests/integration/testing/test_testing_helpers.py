"""``ultimate_jobs.testing``: run_job, drain, traces, crash_proof, the assertions and the plugin."""

from __future__ import annotations

import pytest

from tests.app import jobs, step_jobs
from tests.app.models import Effect
from ultimate_jobs import NO_TENANT, JobsError, Retry, publish_event
from ultimate_jobs.testing import (
    assert_enqueued,
    assert_not_enqueued,
    crash_proof,
    drain,
    enqueued,
    record_effect,
    recorded_effects,
    run_job,
)


@pytest.mark.django_db(transaction=True)
def test_crash_proof_passes_for_an_idempotent_multi_step_job(jobs_clock) -> None:
    report = crash_proof(step_jobs.plain, {"key": "cp"})
    assert report.reference.state == "done"
    assert report.effects == {"effect:first:cp": 1, "effect:second:cp": 1, "rows:testapp_effect": 2}
    assert report.boundaries == [(point, step) for step in ("first", "second")
                                 for point in ("before_step_body", "after_checkpoint_commit")]
    assert all(run.crashed for run in report.runs) and len(report.runs) == 4
    assert {run.trace.state for run in report.runs} == {"done"}


@pytest.mark.django_db(transaction=True)
def test_crash_proof_inside_steps_asks_whether_each_step_body_is_idempotent(jobs_clock) -> None:
    report = crash_proof(step_jobs.atomic_write, {"key": "in"}, inside_steps=True)  # rolled back: once
    assert ("after_step_body_before_checkpoint", "write") in report.boundaries
    with pytest.raises(JobsError) as err:
        crash_proof(step_jobs.plain, {"key": "in"}, inside_steps=True)  # an external call in a step: twice
    assert "after_step_body_before_checkpoint of step 'first'" in err.value.cause


@pytest.mark.django_db(transaction=True)
def test_crash_proof_reports_an_effect_done_outside_a_step(jobs_clock) -> None:
    with pytest.raises(JobsError) as err:
        crash_proof(step_jobs.outside, {"key": "o"})
    assert err.value.code == "X_JOB_CRASH_DIVERGED"
    assert "'effect:outside:o' happened 2 time(s)" in err.value.cause


@pytest.mark.django_db(transaction=True)
def test_crash_proof_sees_a_double_orm_write_and_passes_atomic_steps(declare, jobs_clock) -> None:
    crash_proof(step_jobs.atomic_write, {"key": "a"}, inside_steps=True)  # atomic: one row whatever the crash

    @declare(idempotency_key="{k}", tenant=NO_TENANT, retry=3)
    def writes_outside(ctx, *, k: str) -> None:
        Effect.objects.create(key=f"outside-row:{k}")  # an ORM write outside any step
        ctx.step.run("after", lambda: 1)

    with pytest.raises(JobsError) as err:
        crash_proof(writes_outside, {"k": "x"})
    assert err.value.code == "X_JOB_CRASH_DIVERGED"
    assert "'rows:testapp_effect' happened 2 time(s)" in err.value.cause
    with pytest.raises(JobsError) as err:
        crash_proof(writes_outside, {"k": "y"}, effects=lambda: {"outside": Effect.objects.count()})
    assert "'custom:outside'" in err.value.cause or "'rows:testapp_effect'" in err.value.cause


@pytest.mark.django_db(transaction=True)
def test_crash_proof_drives_sleeps_and_reports_once_steps_that_end_unknown(jobs_clock) -> None:
    report = crash_proof(step_jobs.sleeper, {"key": "z", "seconds": 60})
    assert report.reference.state == "done"
    report = crash_proof(step_jobs.once_charge, {"key": "c"})  # at most once: never twice
    unknown = [run for run in report.runs if run.trace.error_code == "X_STEP_OUTCOME_UNKNOWN"]
    assert [(run.point, run.step) for run in unknown] == [("before_step_body", "charge")]


@pytest.mark.django_db
def test_run_job_works_inside_the_test_transaction(jobs_clock) -> None:
    # pytest-django's plain ``db``: the test is one transaction; the helpers run on its thread.
    trace = run_job(step_jobs.onboard, org="tx", nudge_failures=1)
    assert (trace.state, trace.attempt) == ("done", 2)
    assert trace.steps["nudge"].executions == 2 and trace.steps["provision"].executions == 1
    assert run_job(step_jobs.waiter, key="w").state == "suspended"
    publish_event("tests.reply", {"key": "w"})
    (woken,) = drain()
    assert woken.result == {"key": "w"}
    crash_proof(step_jobs.atomic_write, {"key": "in-tx"})


@pytest.mark.django_db
def test_run_job_freezes_the_clock_over_retry_delays_when_it_is_not_frozen() -> None:
    from ultimate_jobs import clock

    trace = run_job(step_jobs.onboard, org="free", nudge_failures=2)  # two 1s delays, no waiting
    assert trace.state == "done" and not clock.is_frozen()


@pytest.mark.django_db
def test_drain_runs_every_due_job_and_answers_their_traces(jobs_clock) -> None:
    a = jobs.flaky.enqueue(key="a", failures=1)
    b = jobs.noop.enqueue(key="b")
    later = jobs.noop.using(delay="1h").enqueue(key="later")
    traces = {t.id: t for t in drain()}
    assert set(traces) == {a.id, b.id}
    assert traces[a.id].state == "done" and traces[a.id].attempt == 2
    (trace,) = drain(advance="1h")
    assert trace.id == later.id and trace.state == "done"


def test_drain_with_advance_needs_a_frozen_clock() -> None:
    with pytest.raises(RuntimeError, match="frozen clock"):
        drain(advance="1s")


@pytest.mark.django_db
def test_enqueue_assertions(declare) -> None:
    jobs.noop.enqueue(key="k1")
    jobs.noop.enqueue(key="k2")
    assert len(assert_enqueued(jobs.noop)) == 2
    (row,) = assert_enqueued(jobs.noop, key="k1", count=1)
    # Inside the test's transaction an enqueue is staged in the outbox; the assertions see it.
    assert row["payload"] == {"key": "k1"} and row["state"] == "staged"
    assert_not_enqueued(jobs.noop, key="k3")
    assert_not_enqueued(jobs.flaky)
    with pytest.raises(AssertionError, match="no tests.noop job with key='k3'"):
        assert_enqueued(jobs.noop, key="k3")
    with pytest.raises(AssertionError, match="expected 3"):
        assert_enqueued(jobs.noop, count=3)
    with pytest.raises(AssertionError, match="were enqueued"):
        assert_not_enqueued(jobs.noop, key="k2")
    drain()
    assert enqueued(jobs.noop) == []
    assert len(enqueued(jobs.noop, states=("done",))) == 2


def test_record_effect_counts() -> None:
    before = recorded_effects()["unit:x"]
    record_effect("unit:x")
    record_effect("unit:x", 2)
    assert recorded_effects()["unit:x"] == before + 3


def test_the_plugin_fixtures_are_registered(request, jobs_clock) -> None:
    from ultimate_jobs import clock

    assert clock.is_frozen()
    start = jobs_clock.now()
    assert jobs_clock.advance("2h") - start == __import__("datetime").timedelta(hours=2)
    for name in ("run_job", "drain_jobs", "crash_proof", "record_effect"):
        assert callable(request.getfixturevalue(name))


@pytest.mark.django_db
def test_run_job_answers_the_live_job_holding_the_key(declare, jobs_clock) -> None:
    @declare(idempotency_key="{k}", tenant=NO_TENANT, retry=Retry(attempts=1))
    def nap(ctx, *, k: str) -> None:
        ctx.step.sleep("1d")

    first = run_job(nap, k="same")
    assert run_job(nap, k="same").id == first.id
