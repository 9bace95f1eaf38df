"""LIMITS in a real claim: blocked tenants are not claimed; an over-claim is shed uncounted."""

import threading

import pytest
from django.test import override_settings

from ultimate_jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


@override_settings(ULTIMATE_JOBS={"LIMITS": {"per_tenant": 1}})
def test_one_run_per_tenant_in_flight_and_the_excess_is_shed_uncounted(declare, make_worker) -> None:
    gate = threading.Event()

    @declare(idempotency_key="{ref}", tenant="{org}")
    def per_org(ctx, *, ref: str, org: str) -> str:
        gate.wait(10)
        return ref

    per_org.enqueue_many([{"ref": "a1", "org": "acme"}, {"ref": "a2", "org": "acme"},
                          {"ref": "g1", "org": "globex"}])
    worker = make_worker(queues=["default"], concurrency=10)
    started = worker.run_once()
    assert sorted(run.claimed.tenant_id for run in started) == ["acme", "globex"]
    assert worker.stats["shed"] == 1  # a2 came in the same batch as a1
    worker.run_once()  # settles any shed claim; acme is blocked in the claim itself now
    assert sorted(r.claimed.tenant_id for r in worker.attempts.values()) == ["acme", "globex"]
    waiting = Job.objects.filter(state="ready").get()
    assert (waiting.attempt, waiting.last_error) == (0, None)
    gate.set()
    for run in list(worker.attempts.values()):
        run.finished.wait(10)
    worker.burst = True
    worker.run(install_signals=False)
    assert set(Job.objects.values_list("state", flat=True)) == {"done"}
