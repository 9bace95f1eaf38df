"""Events are tenant-scoped: a run waits only for events of its own tenant, so one tenant's publish
never wakes another tenant's run waiting for the same event."""

from __future__ import annotations

import pytest

from ultimate_jobs import NO_TENANT, JobsError, publish_event
from ultimate_jobs.models import Job, JobEvent
from ultimate_jobs.testing import drain, run_job

pytestmark = pytest.mark.django_db


@pytest.fixture
def await_invoice(declare):
    @declare(name="tests.security.await_invoice", idempotency_key="{org}:{invoice}", tenant="{org}")
    def await_invoice(ctx, *, org: str, invoice: int) -> dict:
        return ctx.step.wait_for_event("paid", "invoice.paid", match={"invoice": invoice})

    return await_invoice


def test_another_tenants_event_never_wakes_a_wait_and_its_own_does(await_invoice, jobs_clock) -> None:
    trace = run_job(await_invoice, org="acme", invoice=1)
    assert trace.state == "suspended"
    due = Job.objects.get(id=trace.id).run_at
    assert publish_event("invoice.paid", {"invoice": 1, "payer": "globex-secret"}, tenant_id="globex") == 0
    assert publish_event("invoice.paid", {"invoice": 1, "payer": "nobody"}) == 0  # no tenant is not acme
    assert Job.objects.get(id=trace.id).run_at == due
    # The backstop poll looks again later: globex's event is still not acme's answer.
    assert [t.state for t in drain(advance="1h")] == ["suspended"]
    assert publish_event("invoice.paid", {"invoice": 1, "payer": "acme"}, tenant_id="acme") == 1
    (trace,) = drain()
    assert (trace.state, trace.result) == ("done", {"invoice": 1, "payer": "acme"})
    assert trace.steps["paid"].output == {"invoice": 1, "payer": "acme"}


def test_a_no_tenant_run_waits_only_for_events_published_with_no_tenant(declare, jobs_clock) -> None:
    @declare(name="tests.security.await_global", idempotency_key="{k}", tenant=NO_TENANT)
    def await_global(ctx, *, k: str) -> dict:
        return ctx.step.wait_for_event("ping", "system.ping")

    trace = run_job(await_global, k="g")
    assert publish_event("system.ping", {"from": "acme"}, tenant_id="acme") == 0
    assert [t.state for t in drain(advance="1h")] == ["suspended"]
    assert publish_event("system.ping", {"from": "ops"}, tenant_id=None) == 1
    (trace,) = drain()
    assert trace.result == {"from": "ops"}


def test_a_body_publishes_under_its_own_tenant_by_default(declare, await_invoice, jobs_clock) -> None:
    @declare(name="tests.security.pays", idempotency_key="{org}", tenant="{org}")
    def pays(ctx, *, org: str) -> int:
        return publish_event("invoice.paid", {"invoice": 7, "payer": org})

    waiting = {org: run_job(await_invoice, org=org, invoice=7) for org in ("acme", "globex")}
    assert run_job(pays, org="globex").result == 1  # woke globex's waiter only
    assert list(JobEvent.objects.values_list("tenant_id", flat=True)) == ["globex"]
    traces = {t.id: t for t in drain()}
    assert traces[waiting["globex"].id].result == {"invoice": 7, "payer": "globex"}
    assert waiting["acme"].id not in traces
    assert Job.objects.get(id=waiting["acme"].id).state == "suspended"


@pytest.mark.parametrize("tenant_id", ["", "acme\x00", "x" * 201, 4.2, True])
def test_a_bad_tenant_id_is_refused_before_anything_is_written(tenant_id: object) -> None:
    with pytest.raises(JobsError) as err:
        publish_event("invoice.paid", {"invoice": 1}, tenant_id=tenant_id)  # type: ignore[arg-type]
    assert err.value.code == "X_EVENT_INVALID"
    assert not JobEvent.objects.exists()
