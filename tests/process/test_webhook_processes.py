"""webhook() under real worker processes: a worker killed while its request is in flight leaves
the delivery to another worker, which sends the same event again (at least once); an endpoint that
trickles its answer a byte a second is cut at the delivery's timeout and holds no slot."""

from __future__ import annotations

import signal

import pytest

from tests.process.conftest import Start, wait_until
from tests.support.http_receiver import Receiver, Trickle
from tests.support.webhook_jobs import SECRET, deliver, slow_deliver, unrelated
from ultimate_jobs import ops, verify_webhook_signature
from ultimate_jobs.models import Job, WebhookDelivery

pytestmark = pytest.mark.process
ENV = {"JOBS_TEST_MODULES": "tests.support.webhook_jobs", "JOBS_TEST_VISIBILITY": "2s"}


def test_sigkill_mid_delivery_is_delivered_again_by_another_worker(started_worker: Start,
                                                                   receiver: Receiver) -> None:
    receiver.script = [("hang", 30), 200]  # the first request is held open until the worker dies
    victim = started_worker(env=ENV)
    enqueued = deliver.enqueue(endpoint_id="ep_1", event_id="evt_1", url=f"{receiver.url}/hook")
    wait_until(lambda: len(receiver.requests) == 1, timeout=30, procs=(victim,), what="the request in flight")
    victim.kill()
    assert victim.proc.returncode == -signal.SIGKILL
    rescuer = started_worker(env=ENV)
    wait_until(lambda: Job.objects.filter(id=enqueued.id, state="done").exists(), timeout=60,
               procs=(rescuer,), what="the delivery done by the second worker")
    first, second = receiver.requests[:2]
    assert first.body == second.body == b'{"order":"evt_1"}'
    assert first.headers["X-Ultimate-Webhook-Id"] == second.headers["X-Ultimate-Webhook-Id"] == "evt_1"
    for seen in (first, second):  # each attempt signed at its own send time, both genuine
        assert verify_webhook_signature(seen.body, seen.headers, SECRET, tolerance=120)
    job = ops.get_job(enqueued.id)
    assert (job["attempt"], job["result"]["status"]) == (2, 200)
    # The killed attempt never finished, so it wrote no ledger row; the one that did, did.
    assert list(WebhookDelivery.objects.values_list("attempt", "status_code")) == [(2, 200)]


def test_two_workers_deliver_a_batch_once_each(started_worker: Start, receiver: Receiver) -> None:
    steady = {"JOBS_TEST_MODULES": ENV["JOBS_TEST_MODULES"]}  # the default 30s lease: no lapse, no redelivery
    workers = (started_worker(env=steady), started_worker(env=steady))
    ids = [r.id for r in deliver.enqueue_many([{"endpoint_id": "ep_1", "event_id": f"evt_{n}",
                                                "url": f"{receiver.url}/hook"} for n in range(40)])]
    wait_until(lambda: Job.objects.filter(id__in=ids, state="done").count() == 40, timeout=90, procs=workers,
               what="forty deliveries done")
    assert sorted(s.headers["X-Ultimate-Webhook-Id"] for s in receiver.requests) == sorted(
        f"evt_{n}" for n in range(40))
    assert WebhookDelivery.objects.filter(status_code=200).count() == 40


def test_a_trickling_endpoint_is_cut_at_the_timeout_and_frees_the_slot(started_worker: Start,
                                                                         trickle: Trickle) -> None:
    # Two deliveries to an endpoint that sends one header byte a second fill both slots of a
    # --concurrency 2 worker; each must end at its 3s timeout (one wall-clock deadline, not a
    # per-read one), land in the ledger as a failure, and give the slot back to an unrelated job.
    worker = started_worker("--concurrency", "2", env=ENV)
    slow = [slow_deliver.enqueue(endpoint_id="ep_slow", event_id=f"evt_slow_{n}", url=f"{trickle.url}/hook").id
            for n in range(2)]
    wait_until(lambda: len(trickle.connections) == 2, timeout=30, procs=(worker,), what="both slow requests sent")
    other = unrelated.enqueue(n=7)
    # Generous bounds: the timeout is 3s; before this fix the slots were held until the endpoint
    # stopped (here 600s) and the unrelated job never ran.
    wait_until(lambda: Job.objects.filter(id=other.id, state="done").exists(), timeout=45, procs=(worker,),
               what="the unrelated job done while the endpoint still trickles")
    assert ops.get_job(other.id)["result"] == {"n": 7}
    wait_until(lambda: Job.objects.filter(id__in=slow, state="dead").count() == 2, timeout=45, procs=(worker,),
               what="both slow deliveries failed")
    for job_id in slow:
        assert ops.get_job(job_id)["error_code"] == "X_WEBHOOK_DELIVERY_FAILED"
    rows = sorted(WebhookDelivery.objects.filter(endpoint_id="ep_slow").values_list("event_id", "status_code",
                                                                                        "error_code"))
    assert rows == [("evt_slow_0", None, "X_WEBHOOK_DELIVERY_FAILED"), ("evt_slow_1", None,
                                                                        "X_WEBHOOK_DELIVERY_FAILED")]
    assert WebhookDelivery.objects.filter(endpoint_id="ep_slow", duration_ms__lt=30_000).count() == 2
    wait_until(lambda: all(c.closed is not None for c in trickle.connections), timeout=30, procs=(worker,),
               what="the worker hung up on the slow endpoint")
    held = [c.held for c in trickle.connections]
    assert all(h is not None and h < 30 for h in held), held  # seconds, never the endpoint's minutes
    print(f"slow-endpoint slot hold: {', '.join(f'{h:.2f}s' for h in held if h is not None)}")
