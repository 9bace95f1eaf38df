"""``step.sleep`` and ``step.wait_for_event`` / ``publish_event``: suspension, wake-ups, windows."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django import forms
from django.db import transaction

from tests.app import step_jobs
from tests.integration.steps.conftest import effect_keys
from ultimate_jobs import NO_TENANT, JobsError, Settled, Suspension, publish_event
from ultimate_jobs.models import Job, JobEvent
from ultimate_jobs.testing import drain, run_job

pytestmark = pytest.mark.django_db  # the helpers run on the test's thread, inside its transaction


def test_a_sleep_suspends_without_burning_an_attempt_and_resumes_at_the_wake_time(jobs_clock) -> None:
    trace = run_job(step_jobs.sleeper, key="s", seconds=3600)
    assert (trace.state, trace.attempt) == ("suspended", 0)  # the attempt was handed back
    assert trace.run_at == jobs_clock.now() + timedelta(seconds=3600)
    assert trace.steps["sleep:1"].status == "started"
    assert drain(advance="59m") == []  # not due yet
    (trace,) = drain(advance="1m")
    assert (trace.state, trace.attempt, trace.result["attempt"]) == ("done", 1, 1)  # retry=1 survives a sleep
    assert effect_keys() == ["before:s", "after:s"]
    assert [s.status for s in trace.steps.values()] == ["completed"] * 3


def test_except_exception_around_a_sleep_still_suspends(jobs_clock) -> None:
    assert not issubclass(Suspension, Exception) and issubclass(Suspension, BaseException)
    assert run_job(step_jobs.swallower, key="x").state == "suspended"
    (trace,) = drain(advance="1h")
    assert (trace.state, trace.result) == ("done", "woke")


def test_a_body_that_swallows_even_base_exceptions_still_suspends(declare, jobs_clock) -> None:
    @declare(idempotency_key="{k}", tenant=NO_TENANT)
    def stubborn(ctx, *, k: str) -> str:
        try:
            ctx.step.sleep("nap", "1h")
        except BaseException:  # noqa: B036 - what a careless body does
            pass
        return "carried on"

    assert run_job(stubborn, k="x").state == "suspended"


def test_named_and_unnamed_sleeps(declare, jobs_clock) -> None:
    @declare(idempotency_key="{k}", tenant=NO_TENANT)
    def sleeps(ctx, *, k: str) -> None:
        ctx.step.sleep("10s")
        ctx.step.sleep("nap", timedelta(seconds=20))
        ctx.step.sleep(30)

    assert run_job(sleeps, k="x").state == "suspended"
    drain(advance="10s")
    drain(advance="20s")
    (trace,) = drain(advance="30s")
    assert trace.state == "done"
    assert list(trace.steps) == ["sleep:1", "nap", "sleep:2"]


def test_a_matching_publish_wakes_the_waiter_and_is_its_answer(jobs_clock) -> None:
    trace = run_job(step_jobs.waiter, key="k1")
    assert (trace.state, trace.attempt) == ("suspended", 0)
    wait = Job.objects.get(id=trace.id)
    assert wait.run_at > jobs_clock.now()  # the backstop poll, not now
    assert publish_event("tests.reply", {"key": "k1", "answer": 42}) == 1  # woke it
    assert Job.objects.get(id=trace.id).run_at == jobs_clock.now()  # due at once: the same statement
    (trace,) = drain()
    assert (trace.state, trace.result) == ("done", {"key": "k1", "answer": 42})
    assert trace.steps["reply"].output == {"key": "k1", "answer": 42}
    assert effect_keys() == ["after-wait:k1"]


def test_rolled_back_and_non_matching_publishes_do_not_wake(jobs_clock) -> None:
    trace = run_job(step_jobs.waiter, key="k2")
    with pytest.raises(RuntimeError), transaction.atomic():
        assert publish_event("tests.reply", {"key": "k2"}) == 1  # woken inside the transaction...
        raise RuntimeError("the request failed")
    assert publish_event("tests.reply", {"key": "someone-else"}) == 0
    assert publish_event("tests.other", {"key": "k2"}) == 0
    assert not JobEvent.objects.filter(payload__key="k2", name="tests.reply").exists()  # ...and rolled back
    assert drain() == []
    jobs_clock.advance(timedelta(minutes=30))  # past the backstop poll: the waiter looks and waits on
    (trace,) = drain()
    assert trace.state == "suspended" and trace.steps["reply"].status == "started"


def test_a_timeout_answers_none_and_a_late_event_does_not_rewrite_it(jobs_clock) -> None:
    from ultimate_jobs.db import store_for

    trace = run_job(step_jobs.waiter, key="k3", timeout=60)
    poll = 900 if store_for().supports_listen_notify else 30  # the backstop without a configured event_poll
    assert Job.objects.get(id=trace.id).run_at == jobs_clock.now() + timedelta(seconds=min(60, poll))
    (trace,) = drain(advance="60s")
    assert (trace.state, trace.result) == ("done", None)
    assert (trace.steps["reply"].status, trace.steps["reply"].output) == ("completed", None)
    assert publish_event("tests.reply", {"key": "k3"}) == 0  # no open wait any more
    from ultimate_jobs import ops

    ops.retry_job(trace.id)  # even a replay of the run answers what was recorded
    (again,) = drain()
    assert (again.state, again.result) == ("done", None)


def test_an_event_published_after_the_wait_began_but_before_the_waiter_suspended_is_delivered(
        jobs_clock, monkeypatch) -> None:
    from ultimate_jobs.db import store_for

    store_type = type(store_for())
    original = store_type.step_begin

    def begin_then_publish(self, **kwargs):
        began = original(self, **kwargs)
        if kwargs["event"] == "tests.reply":  # the wait began; a request publishes before it suspends
            assert publish_event("tests.reply", {"key": "k4", "early": True}) == 0  # nobody suspended yet
        return began

    monkeypatch.setattr(store_type, "step_begin", begin_then_publish)
    trace = run_job(step_jobs.waiter, key="k4")
    assert (trace.state, trace.result) == ("done", {"key": "k4", "early": True})


def test_an_event_published_before_the_wait_began_is_not_delivered(jobs_clock) -> None:
    publish_event("tests.reply", {"key": "k5", "stale": True})
    jobs_clock.advance("1s")
    trace = run_job(step_jobs.waiter, key="k5", timeout=10)
    assert trace.state == "suspended"
    (trace,) = drain(advance="10s")
    assert trace.result is None


def test_the_settle_recheck_wakes_a_waiter_whose_event_committed_while_it_suspended(jobs_clock) -> None:
    from ultimate_jobs.db import store_for

    trace = run_job(step_jobs.waiter, key="k6")
    # An event that committed between the waiter's look and its settle: the publish saw the row
    # still running, so nothing woke it. The re-check a suspension runs once settled does.
    JobEvent.objects.create(name="tests.reply", payload={"key": "k6"}, published_at=jobs_clock.now())
    assert Job.objects.get(id=trace.id).run_at > jobs_clock.now()
    assert store_for().job_wake_waiter(job_id=trace.id, now=jobs_clock.now()) is True
    assert Job.objects.get(id=trace.id).run_at == jobs_clock.now()
    assert store_for().job_wake_waiter(job_id=trace.id, now=jobs_clock.now()) is False  # due already
    (trace,) = drain()
    assert (trace.state, trace.result) == ("done", {"key": "k6"})


def test_event_poll_bounds_each_suspension(declare, jobs_clock) -> None:
    @declare(idempotency_key="{k}", tenant=NO_TENANT, event_poll="5m")
    def polled(ctx, *, k: str) -> object:
        return ctx.step.wait_for_event("w", "tests.poll", timeout="1d")

    trace = run_job(polled, k="x")
    assert Job.objects.get(id=trace.id).run_at == jobs_clock.now() + timedelta(minutes=5)


def test_containment_matching_is_jsonb_at_greater_than(jobs_clock, declare) -> None:
    @declare(idempotency_key="{k}", tenant=NO_TENANT)
    def nested(ctx, *, k: str) -> object:
        return ctx.step.wait_for_event("w", "tests.nested", match={"order": {"id": 7}, "tags": ["paid"]})

    run_job(nested, k="x")
    assert publish_event("tests.nested", {"order": {"id": 7}, "tags": ["new"]}) == 0
    assert publish_event("tests.nested", {"order": {"id": "7"}, "tags": ["paid"]}) == 0
    assert publish_event("tests.nested", {"order": {"id": 7, "total": 3}, "tags": ["new", "paid"], "x": 1}) == 1
    (trace,) = drain()
    assert trace.result["x"] == 1


@pytest.mark.parametrize("event, payload", [("", {}), ("x" * 201, {}), ("ok", [1]), ("ok", {"n": float("nan")}),
                                            ("ok", {"s": "\x00"})])
def test_publish_refuses_bad_events_before_writing(event, payload) -> None:
    with pytest.raises(JobsError) as err:
        publish_event(event, payload)
    assert err.value.code == "X_EVENT_INVALID"
    assert not JobEvent.objects.exists()


def test_settled_and_publish_event_are_public() -> None:
    import ultimate_jobs

    assert ultimate_jobs.publish_event is publish_event and ultimate_jobs.Settled is Settled


class Payment(forms.Form):
    """The schema a Django user writes: the payload bound as a form's data, the answer cleaned_data."""

    key = forms.CharField()
    amount = forms.IntegerField(min_value=1)


def declare_waiter(declare, schema):  # type: ignore[no-untyped-def]
    @declare(name="tests.steps.schema_waiter", idempotency_key="schema:{key}", tenant=NO_TENANT)
    def schema_waiter(ctx, *, key: str) -> object:
        try:
            paid = ctx.step.wait_for_event("paid", "tests.paid", match={"key": key}, schema=schema)
        except JobsError:
            return "swallowed"  # a refusal ends the run all the same: it is latched
        return {"amount": paid["amount"], "type": type(paid["amount"]).__name__}

    return schema_waiter


def test_a_form_schema_answers_cleaned_data_and_refuses_a_bad_payload_terminally(declare, jobs_clock) -> None:
    waiter = declare_waiter(declare, Payment)
    good = run_job(waiter, key="good")
    publish_event("tests.paid", {"key": "good", "amount": "42"})
    (good,) = drain()
    assert (good.state, good.result) == ("done", {"amount": 42, "type": "int"})  # coerced, as a form does
    bad = run_job(waiter, key="bad")
    publish_event("tests.paid", {"key": "bad", "amount": "lots"})
    (bad,) = drain()
    assert (bad.state, bad.attempt, bad.stop_reason, bad.error_code) == ("dead", 1, "terminal", "X_JOB_EVENT_INVALID")
    assert "wait_for_event('paid'): the 'tests.paid' payload it received is refused by its schema" in bad.last_error
    assert "amount: Enter a whole number." in bad.last_error
    assert bad.steps["paid"].output == {"key": "bad", "amount": "lots"}  # stored as it arrived


def test_a_validator_schema_and_a_replay_of_a_stored_payload(declare, jobs_clock) -> None:
    from ultimate_jobs import ops

    strict = {"on": True}

    def validate(payload: dict) -> dict:  # type: ignore[type-arg]
        if strict["on"] and payload["amount"] > 100:
            raise ValueError(f"amount over the limit of 100: {payload['amount']}")
        return {**payload, "amount": payload["amount"]}

    waiter = declare_waiter(declare, validate)
    trace = run_job(waiter, key="big")
    publish_event("tests.paid", {"key": "big", "amount": 500})
    (trace,) = drain()
    assert (trace.state, trace.error_code) == ("dead", "X_JOB_EVENT_INVALID")
    assert "ValueError: amount over the limit of 100: 500" in trace.last_error
    # A replay checks the stored payload again: still refused while the rule stands...
    ops.retry_job(trace.id)
    (again,) = drain()
    assert (again.state, again.error_code, again.attempt) == ("dead", "X_JOB_EVENT_INVALID", 1)
    strict["on"] = False  # ...and answered once the schema accepts it (no new event needed)
    ops.retry_job(trace.id)
    (fixed,) = drain()
    assert (fixed.state, fixed.result) == ("done", {"amount": 500, "type": "int"})


def test_a_schema_that_is_neither_a_form_nor_callable_is_refused(declare, jobs_clock) -> None:
    waiter = declare_waiter(declare, {"amount": int})
    trace = run_job(waiter, key="odd")
    assert (trace.state, trace.error_code) == ("dead", "X_JOB_DECLARATION_INVALID")
    assert "schema={'amount': <class 'int'>} is neither a Django Form class nor a callable" in trace.last_error
