"""``TENANT_CONTEXT``: entered and exited around the body with the run's tenant; a factory that fails
(on import, on enter, on exit) fails the attempt with its error stored, redacted, through the
ordinary retry and dead-letter path — never a run left ``running``."""

from __future__ import annotations

from typing import Any

import pytest

from ultimate_jobs import NO_TENANT, Retry, Worker
from ultimate_jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)
RECORD: list[tuple[str, str | None]] = []
FAIL: dict[str, str] = {}
PLANTED = "hunter2-tenant-ctx"


class Recording:
    """The factory under test: ``TENANT_CONTEXT = "tests.integration.security.test_tenant_context.Recording"``."""

    def __init__(self, tenant_id: str | None) -> None:
        self.tenant_id = tenant_id

    def __enter__(self) -> None:
        RECORD.append(("enter", self.tenant_id))
        if "enter" in FAIL:
            raise PermissionError(FAIL["enter"])

    def __exit__(self, *exc: object) -> bool:
        RECORD.append(("exit", self.tenant_id))
        if "exit" in FAIL:
            raise PermissionError(FAIL["exit"])
        return False


@pytest.fixture(autouse=True)
def tenant_context(settings: Any) -> Any:
    RECORD.clear()
    FAIL.clear()
    settings.ULTIMATE_JOBS = {"TENANT_CONTEXT": "tests.integration.security.test_tenant_context.Recording"}
    yield settings
    FAIL.clear()


@pytest.fixture
def per_org(declare):
    @declare(name="tests.security.per_org", idempotency_key="{org}", tenant="{org}", retry=Retry(attempts=2))
    def per_org(ctx, *, org: str) -> str:
        RECORD.append(("body", ctx.tenant_id))
        return f"ran for {org}"

    return per_org


@pytest.fixture
def global_job(declare):
    @declare(name="tests.security.global_job", idempotency_key="{k}", tenant=NO_TENANT, retry=Retry(attempts=1))
    def global_job(ctx, *, k: str) -> str:
        RECORD.append(("body", ctx.tenant_id))
        return "ran"

    return global_job


def _burst() -> dict[str, int]:
    with Worker(queues=["default"], burst=True) as worker:
        return worker.run(install_signals=False)


def test_the_context_is_entered_and_exited_around_the_body_with_the_runs_tenant(per_org, global_job) -> None:
    acme = per_org.enqueue(org="acme")
    _burst()
    assert RECORD == [("enter", "acme"), ("body", "acme"), ("exit", "acme")]
    RECORD.clear()
    bare = global_job.enqueue(k="g")
    _burst()
    assert RECORD == [("enter", None), ("body", None), ("exit", None)]
    assert [Job.objects.get(id=r.id).result for r in (acme, bare)] == ["ran for acme", "ran"]


def test_a_context_that_raises_on_enter_fails_the_attempt_with_its_error_stored(per_org, global_job) -> None:
    FAIL["enter"] = f"schema switch refused, password={PLANTED}"
    retried = per_org.enqueue(org="acme")
    dead = global_job.enqueue(k="g")
    stats = _burst()
    assert stats["lost"] == 0
    assert ("body", "acme") not in RECORD and ("body", None) not in RECORD  # the body never ran
    retry_row, dead_row = Job.objects.get(id=retried.id), Job.objects.get(id=dead.id)
    # First of two attempts: back to the queue for a retry, the error kept.
    assert (retry_row.state, retry_row.attempt, retry_row.error_code) == ("delayed", 1, "X_JOB_FAILED")
    # The only attempt: dead-lettered as a failure, not as a lapsed lease.
    assert (dead_row.state, dead_row.stop_reason, dead_row.error_code) == ("dead", "attempts-exhausted",
                                                                           "X_JOB_FAILED")
    for row in (retry_row, dead_row):
        assert "PermissionError: schema switch refused" in row.last_error
        assert PLANTED not in row.last_error and "[redacted]" in row.last_error


def test_a_context_that_raises_on_exit_fails_the_attempt(global_job) -> None:
    FAIL["exit"] = f"could not reset the search path for token={PLANTED}"
    r = global_job.enqueue(k="exit")
    assert _burst()["lost"] == 0
    assert RECORD == [("enter", None), ("body", None), ("exit", None)]
    row = Job.objects.get(id=r.id)
    assert (row.state, row.stop_reason, row.result) == ("dead", "attempts-exhausted", None)
    assert "PermissionError: could not reset the search path" in row.last_error and PLANTED not in row.last_error


def test_an_unimportable_factory_fails_the_attempt_naming_it(tenant_context, global_job) -> None:
    tenant_context.ULTIMATE_JOBS = {"TENANT_CONTEXT": "tests.integration.security.no_such_module.Factory"}
    r = global_job.enqueue(k="missing")
    assert _burst()["lost"] == 0
    row = Job.objects.get(id=r.id)
    assert row.state == "dead" and "tests.integration.security.no_such_module" in row.last_error
    assert RECORD == []


def test_an_async_body_gets_the_same_context_and_the_same_failure_path(declare) -> None:
    @declare(name="tests.security.async_org", idempotency_key="{org}", tenant="{org}", retry=Retry(attempts=1))
    async def async_org(ctx, *, org: str) -> str:
        RECORD.append(("body", ctx.tenant_id))
        return org

    ran = async_org.enqueue(org="initech")
    _burst()
    assert RECORD == [("enter", "initech"), ("body", "initech"), ("exit", "initech")]
    assert Job.objects.get(id=ran.id).result == "initech"
    FAIL["enter"] = f"no schema for secret={PLANTED}"
    failed = async_org.enqueue(org="hooli")
    assert _burst()["lost"] == 0
    row = Job.objects.get(id=failed.id)
    assert (row.state, row.stop_reason) == ("dead", "attempts-exhausted")
    assert "PermissionError: no schema for secret=[redacted]" in row.last_error and PLANTED not in row.last_error


def test_a_no_tenant_job_enqueued_for_a_tenant_runs_with_no_tenant_context(global_job) -> None:
    first = global_job.using(tenant_id="acme").enqueue(k="scoped")
    # The row's tenant still namespaces the dedupe: acme's key is acme's, globex gets its own job.
    assert global_job.using(tenant_id="acme").enqueue(k="scoped").deduped is True
    other = global_job.using(tenant_id="globex").enqueue(k="scoped")
    assert other.id != first.id
    _burst()
    assert RECORD == [("enter", None), ("body", None), ("exit", None)] * 2  # never acme's context
    assert Job.objects.get(id=first.id).tenant_id == "acme" and Job.objects.get(id=first.id).state == "done"


def test_a_row_whose_tenant_is_not_its_inputs_is_refused_before_the_body(per_org) -> None:
    planted = per_org.enqueue(org="acme")
    Job.objects.filter(id=planted.id).update(tenant_id="globex")  # written by hand, or by an older rule
    assert _burst()["lost"] == 0
    row = Job.objects.get(id=planted.id)
    assert (row.state, row.attempt, row.stop_reason, row.error_code) == ("dead", 1, "terminal", "X_JOB_TENANT_MISMATCH")
    assert "queued for tenant 'globex' but its input belongs to 'acme'" in row.last_error
    assert RECORD == []  # no context entered, no body run
