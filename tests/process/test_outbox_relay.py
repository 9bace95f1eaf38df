"""The outbox relay as real OS processes: racing relays, a relay SIGKILLed mid-batch, SIGTERM.

Each test runs ``python -m django jobs_relay`` (or ``jobs_worker``) against the suite's database,
on PostgreSQL and on SQLite (one writer). A process is killed at an exact line through the
test-only fault points (``ULTIMATE_JOBS_FAULTS``, see ``ultimate_jobs/faults.py``).
"""

from __future__ import annotations

import re
import signal
from datetime import timedelta

import pytest
from django.db import transaction

from tests.app.jobs import fan_out, noop, record
from tests.app.models import Effect
from tests.conftest import wait_for
from ultimate_jobs import clock
from ultimate_jobs.models import Job, OutboxEntry
from ultimate_jobs.outbox import Relay

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]


def stage(n: int, prefix: str) -> list:  # type: ignore[type-arg]
    """Stage ``n`` noops in one committed transaction; answer their ids in staging order."""
    with transaction.atomic():
        results = noop.enqueue_many([{"key": f"{prefix}{i}"} for i in range(n)])
    assert all(r.staged for r in results)
    return [r.id for r in results]


def published_by(proc) -> int:
    found = re.search(r"relay stopped: published=(\d+)", proc.output())
    assert found, proc.output()
    return int(found.group(1))


def assert_published_once_in_order(staged: list) -> None:  # type: ignore[type-arg]
    """Every staged row became exactly one job under its own id, published in staging order."""
    assert Job.objects.count() == len(staged)
    assert set(Job.objects.values_list("id", flat=True)) == set(staged)
    rows = list(OutboxEntry.objects.order_by("staged_at", "id").values_list("id", "job_id", "published_at"))
    assert [r[0] for r in rows] == staged
    assert all(job_id == outbox_id for outbox_id, job_id, _ in rows)
    stamps = [published_at for _, _, published_at in rows]
    assert None not in stamps and stamps == sorted(stamps)  # no batch overtook an earlier one


def test_two_relays_racing_over_one_transaction_publish_every_row_once_in_order(worker_process) -> None:
    relays = [worker_process("--batch-size", "500", command="jobs_relay") for _ in range(2)]
    for relay in relays:
        wait_for(lambda relay=relay: "jobs.outbox.relay-started" in relay.output(), timeout=60)
    staged = stage(3000, "race")  # both relays wake for the same commit
    wait_for(lambda: not OutboxEntry.objects.filter(published_at__isnull=True).exists(), timeout=120)
    for relay in relays:
        relay.signal(signal.SIGTERM)
    assert [relay.wait(30) for relay in relays] == [0, 0]
    assert sum(published_by(relay) for relay in relays) == 3000
    assert_published_once_in_order(staged)


def test_a_relay_killed_mid_batch_loses_nothing_and_duplicates_nothing(worker_process) -> None:
    staged = stage(3000, "kill")
    lease = {"JOBS_TEST_CLAIM_LEASE": "10s"}
    first = worker_process("--burst", "--batch-size", "500", command="jobs_relay",
                           env={**lease, "ULTIMATE_JOBS_FAULTS": "relay_after_publish_before_mark=kill@3"})
    assert first.wait(60) == -signal.SIGKILL
    assert "jobs.fault.struck point=relay_after_publish_before_mark" in first.output()
    # Two batches committed; the third died between its insert and its mark, inside one
    # transaction, so none of it was published, and its rows stay leased to the dead relay.
    assert Job.objects.count() == 1000
    held = OutboxEntry.objects.filter(published_at__isnull=True, claimed_by__isnull=False)
    assert held.count() == 500 and set(held.values_list("id", flat=True)) == set(staged[1000:1500])

    # Inside the lease another relay publishes nothing: not the dead relay's rows, not the rows
    # staged after them, and not again the live jobs the first relay published.
    claimed_at = held.values_list("claimed_at", flat=True).first()
    inside = Relay(relay_id="inside-the-lease", lease="10s")
    assert inside.run_once() == 0 and inside.claimed_last == 0
    assert clock.now() < claimed_at + timedelta(seconds=10)  # the check above ran inside the lease
    assert Job.objects.count() == 1000

    # After the lease another relay process takes the dead relay's batch first, then the rest.
    wait_for(lambda: clock.now() > claimed_at + timedelta(seconds=10.2), timeout=30)
    second = worker_process("--burst", command="jobs_relay", env=lease)
    assert second.wait(60) == 0
    assert published_by(second) == 2000
    assert_published_once_in_order(staged)


def test_sigterm_finishes_the_pass_in_flight_then_exits(worker_process) -> None:
    stage(250, "term")
    relay = worker_process("--batch-size", "100", command="jobs_relay",
                           env={"ULTIMATE_JOBS_FAULTS": "relay_after_publish_before_mark=sleep:2@1"})
    wait_for(lambda: "jobs.fault.struck" in relay.output(), timeout=60)
    relay.signal(signal.SIGTERM)  # lands while the first pass sits between its insert and its mark
    assert relay.wait(30) == 0
    assert published_by(relay) == 100
    assert Job.objects.count() == 100
    assert OutboxEntry.objects.filter(published_at__isnull=False).count() == 100
    assert not OutboxEntry.objects.filter(published_at__isnull=True, claimed_by__isnull=False).exists()


def test_a_committed_enqueue_runs_once_under_its_staged_id_and_a_rolled_back_one_never(worker_process) -> None:
    with transaction.atomic():
        committed = record.enqueue(key="committed")
    with pytest.raises(RuntimeError), transaction.atomic():
        record.enqueue(key="rolled-back")
        raise RuntimeError("roll back")
    assert Job.objects.count() == 0
    worker = worker_process("--burst", "--roles", "worker,relay")
    assert worker.wait(60) == 0, worker.output()
    assert list(Effect.objects.values_list("key", "job_id", "attempt")) == [("committed", committed.id, 1)]
    job = Job.objects.get()
    assert (job.id, job.run_id, job.state) == (committed.id, committed.run_id, "done")


def test_a_burst_relay_that_left_a_poison_row_exits_1_naming_it(worker_process) -> None:
    staged = stage(5, "poison")
    OutboxEntry.objects.filter(id=staged[2]).update(payload="{not json")
    relay = worker_process("--burst", command="jobs_relay")
    assert relay.wait(60) == 1
    out = relay.output()
    assert "relay stopped: published=2 failed=1" in out
    assert re.search(rf"jobs.outbox.publish-failed .*outbox_id={staged[2]} name=tests.noop queue=default", out), out
    assert set(Job.objects.values_list("id", flat=True)) == set(staged[:2])


def test_a_burst_worker_runs_jobs_that_job_bodies_staged_inside_transactions(worker_process) -> None:
    with transaction.atomic():
        fan_out.enqueue(key="fan", children=3)
    worker = worker_process("--burst", "--roles", "worker,relay")
    assert worker.wait(60) == 0, worker.output()
    assert sorted(Effect.objects.values_list("key", flat=True)) == ["fan-0", "fan-1", "fan-2"]
    assert set(Job.objects.values_list("state", flat=True)) == {"done"}
    assert Job.objects.count() == 4 and not OutboxEntry.objects.filter(published_at__isnull=True).exists()
