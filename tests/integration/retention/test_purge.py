"""``purge(name, targets)``: a durable step per target, one clock reading per pass (PostgreSQL and SQLite)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from tests.app.models import Effect
from tests.conftest import Declared
from tests.scheduling import utc
from ultimate_jobs import NO_TENANT, JobsError, Retry, job, purge, registered_jobs
from ultimate_jobs.testing import crash_proof, record_effect, run_job

NOW = utc(2026, 6, 1, 12, 0, 0)


class Sessions:
    """A fake target: remembers every ``now`` it was given and answers a count."""

    name = "sessions"

    def __init__(self, answer: Any = 3, fail_first: int = 0) -> None:
        self.answer = answer
        self.fail_first = fail_first
        self.calls: list[datetime] = []

    def purge_expired(self, now: datetime) -> Any:
        self.calls.append(now)
        record_effect(f"purged:{self.name}")
        if len(self.calls) <= self.fail_first:
            raise ConnectionError("the sessions store is down")
        return self.answer


class AuditLog:
    """A class target: its ``purge_expired`` is a classmethod; labelled by the class name."""

    calls: list[datetime] = []

    @classmethod
    def purge_expired(cls, now: datetime) -> dict[str, int]:
        cls.calls.append(now)
        record_effect("purged:AuditLog")
        return {"rows": 7, "tables": 2}


@pytest.fixture
def declare_purge(declared: Declared) -> Iterator[Callable[..., Any]]:
    """``declare_purge(**options)``: a purge that exists for one test only."""
    yield lambda **options: declared.track(purge(**options))  # declared from this module
    AuditLog.calls.clear()


@pytest.mark.django_db(transaction=True)
def test_a_pass_calls_every_target_with_one_clock_reading_and_answers_their_counts(
        declare_purge, frozen_at) -> None:
    frozen_at(NOW)
    sessions = Sessions()
    nightly = declare_purge(name="tests.nightly-purge", targets=[sessions, AuditLog])
    assert nightly in registered_jobs()
    assert nightly.describe()["input"] == []

    trace = run_job(nightly)
    assert trace.state == "done"
    assert trace.result == {"name": "tests.nightly-purge", "now": "2026-06-01T12:00:00Z",
                            "targets": {"sessions": 3, "AuditLog": {"rows": 7, "tables": 2}}}
    assert sessions.calls == AuditLog.calls == [NOW]  # one reading: both targets were given the same now
    assert sessions.calls[0].tzinfo is not None
    from ultimate_jobs.factories.purge import cancelled

    assert cancelled() is False  # outside a purge run
    assert [(s.name, s.status, s.executions, s.output) for s in trace.steps.values()] == [
        ("now", "completed", 1, "2026-06-01T12:00:00Z"),
        ("purge:sessions", "completed", 1, 3),
        ("purge:AuditLog", "completed", 1, {"rows": 7, "tables": 2})]


@pytest.mark.django_db(transaction=True)
def test_a_failing_target_retries_the_job_without_redoing_the_targets_already_done(
        declare_purge, frozen_at) -> None:
    frozen_at(NOW)
    first, flaky = Sessions(answer=1), Sessions(answer=2, fail_first=1)
    flaky.name = "cache"
    handle = declare_purge(name="tests.flaky-purge", targets=[first, flaky],
                           retry=Retry(attempts=3, delay="5m", jitter=False))

    trace = run_job(handle)  # attempt 1 fails at "purge:cache"; attempt 2 runs 5 minutes later
    assert (trace.state, trace.attempt) == ("done", 2)
    assert first.calls == [NOW]  # not called again on the second attempt: its step replayed
    assert flaky.calls == [NOW, NOW]  # the clock moved for the retry; the pass kept its one reading
    assert trace.steps["purge:sessions"].executions == 1
    assert (trace.steps["purge:cache"].executions, trace.steps["purge:cache"].output) == (2, 2)
    assert trace.result["targets"] == {"sessions": 1, "cache": 2}
    assert trace.result["now"] == "2026-06-01T12:00:00Z"


@pytest.mark.django_db(transaction=True)
def test_a_target_that_keeps_failing_dead_letters_the_pass(declare_purge, frozen_at) -> None:
    frozen_at(NOW)
    broken = Sessions(fail_first=10)
    handle = declare_purge(name="tests.broken-purge", targets=[AuditLog, broken], retry=2)
    trace = run_job(handle)
    assert (trace.state, trace.attempt) == ("dead", 2)
    assert "the sessions store is down" in (trace.last_error or "")
    assert len(AuditLog.calls) == 1 and len(broken.calls) == 2
    assert (trace.steps["purge:sessions"].status, trace.steps["purge:sessions"].executions) == ("failed", 2)


@pytest.mark.django_db(transaction=True)
def test_a_crash_at_any_step_boundary_purges_each_target_once(declare_purge, jobs_clock) -> None:
    handle = declare_purge(name="tests.crash-purge", targets=[Sessions(), AuditLog])
    report = crash_proof(handle, {})
    assert report.reference.state == "done"
    assert report.effects == {"effect:purged:sessions": 1, "effect:purged:AuditLog": 1}
    assert {run.trace.state for run in report.runs} == {"done"}
    assert ("after_checkpoint_commit", "purge:sessions") in report.boundaries


@pytest.mark.django_db(transaction=True)
def test_a_model_or_its_manager_is_a_target(declare_purge, frozen_at, monkeypatch) -> None:
    def purge_expired(now: datetime) -> int:
        return Effect.objects.filter(created_at__lt=now - timedelta(days=1)).delete()[0]

    monkeypatch.setattr(Effect._default_manager, "purge_expired", purge_expired, raising=False)
    frozen_at(NOW)
    Effect.objects.create(key="old")
    Effect.objects.update(created_at=NOW - timedelta(days=2))
    Effect.objects.create(key="young")
    by_model = declare_purge(name="tests.model-purge", targets=[Effect])
    by_manager = declare_purge(name="tests.manager-purge", targets=[Effect.objects])
    assert run_job(by_model).result["targets"] == {"Effect": 1}
    assert run_job(by_manager).result["targets"] == {"Effect": 0}
    assert list(Effect.objects.values_list("key", flat=True)) == ["young"]


class NoMethod:
    pass


class InstanceMethodOnly:
    def purge_expired(self, now: datetime) -> int:
        return 0


class TwoArguments:
    def purge_expired(self, now: datetime, batch: int) -> int:
        return 0


class NotCallable:
    purge_expired = 3


class Named:
    def __init__(self, name: object) -> None:
        self.name = name

    def purge_expired(self, now: datetime) -> int:
        return 0


@pytest.mark.parametrize(("options", "says"), [
    ({"name": "", "targets": [AuditLog]}, "is not a job name"),
    ({"name": " padded", "targets": [AuditLog]}, "is not a job name"),
    ({"name": 7, "targets": [AuditLog]}, "is not a job name"),
    ({"name": "tests.p", "targets": []}, "targets is empty"),
    ({"name": "tests.p", "targets": AuditLog}, "is not a list of targets"),
    ({"name": "tests.p", "targets": "AuditLog"}, "is not a list of targets"),
    ({"name": "tests.p", "targets": [NoMethod()]}, "target 'NoMethod' has no callable purge_expired(now)"),
    ({"name": "tests.p", "targets": [NotCallable()]}, "has no callable purge_expired(now)"),
    ({"name": "tests.p", "targets": [InstanceMethodOnly]}, "has no callable purge_expired(now)"),
    ({"name": "tests.p", "targets": [TwoArguments()]}, "cannot be called as purge_expired(now)"),
    ({"name": "tests.p", "targets": [Named("a"), Named("a")]}, "two targets share the label 'a'"),
    ({"name": "tests.p", "targets": [AuditLog, AuditLog]}, "two targets share the label 'AuditLog'"),
    ({"name": "tests.p", "targets": [Named("")]}, "which is not 1-194 printable characters"),
    ({"name": "tests.p", "targets": [Named("x" * 195)]}, "which is not 1-194 printable characters"),
    ({"name": "tests.p", "targets": [AuditLog], "queue": "Bad Queue"}, "not a valid queue name"),
])
def test_declaration_refusals(options: dict[str, Any], says: str) -> None:
    with pytest.raises(JobsError) as err:
        purge(**options)
    assert err.value.code == "X_JOB_DECLARATION_INVALID"
    assert says in err.value.cause
    assert err.value.fix
    assert "tests.p" not in {h.name for h in registered_jobs()}


def test_a_name_declared_by_another_module_or_by_a_job_is_a_duplicate(declare_purge) -> None:
    handle = declare_purge(name="tests.shared-purge", targets=[AuditLog])
    again = declare_purge(name="tests.shared-purge", targets=[AuditLog, Sessions()])  # same module: replaced
    assert [h for h in registered_jobs() if h.name == "tests.shared-purge"] == [again]
    assert handle.source == again.source == "tests.integration.retention.test_purge.purge('tests.shared-purge')"

    elsewhere = {"__name__": "myapp.jobs", "purge": purge, "AuditLog": AuditLog}
    with pytest.raises(JobsError) as err:
        exec("purge(name='tests.shared-purge', targets=[AuditLog])", elsewhere)  # noqa: S102
    assert err.value.code == "X_JOB_DUPLICATE"
    assert "myapp.jobs.purge('tests.shared-purge')" in err.value.cause

    with pytest.raises(JobsError) as err:
        job(name="tests.shared-purge", idempotency_key="k", tenant=NO_TENANT)(lambda ctx: None)
    assert err.value.code == "X_JOB_DUPLICATE"
    assert [h for h in registered_jobs() if h.name == "tests.shared-purge"] == [again]


def test_the_key_is_the_name_and_the_job_takes_no_input(declare_purge) -> None:
    handle = declare_purge(name="tests.{braces}-purge", targets=[AuditLog], tenant="ops", queue="maintenance")
    assert handle.idempotency_key_for() == "tests.{braces}-purge"
    assert handle.tenant_for() == "ops"
    assert (handle.queue, handle.retry.attempts) == ("maintenance", 3)
    with pytest.raises(JobsError) as err:
        handle.parse({"batch": 10})
    assert err.value.code == "X_JOB_INPUT_INVALID"
