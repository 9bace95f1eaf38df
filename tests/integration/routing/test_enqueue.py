"""Enqueue follows ``QUEUE_DATABASES``: a routed queue's job is written on its alias, an unrouted
one stays on ``DATABASE``; inside a transaction on the caller's database the routed job is staged
there and the relay delivers it into the routed database under the staged id."""

from __future__ import annotations

import pytest
from django.db import transaction

from tests.app.jobs import noop
from tests.support.routing import ROUTED, raw
from ultimate_jobs.outbox import Relay

pytestmark = [pytest.mark.postgres_only,
              pytest.mark.django_db(databases=["default", ROUTED], transaction=True)]

JOBS = "SELECT id, queue, payload->>'key' FROM ultimate_jobs_job ORDER BY queue"
STAGED = "SELECT id, queue, payload, published_at, job_id FROM ultimate_jobs_outboxentry"


def test_a_routed_queue_is_written_on_its_alias_and_an_unrouted_one_on_default(routed) -> None:
    routed_job = noop.using(queue="emails").enqueue(key="secret-routed-7f3a")
    home_job = noop.enqueue(key="secret-home-91bc")
    assert raw(ROUTED, JOBS) == [(routed_job.id, "emails", "secret-routed-7f3a")]
    assert raw("default", JOBS) == [(home_job.id, "default", "secret-home-91bc")]
    assert not routed_job.staged and not home_job.staged


def test_the_route_wins_over_an_explicit_database(routed) -> None:
    """A routed queue's jobs live on its alias, where its workers, ops and the admin look."""
    result = noop.using(queue="emails", database="default").enqueue(key="explicit-default")
    assert raw(ROUTED, "SELECT id FROM ultimate_jobs_job") == [(result.id,)]
    assert raw("default", "SELECT id FROM ultimate_jobs_job") == []


def test_enqueue_many_splits_one_call_across_the_databases_and_answers_in_order(routed) -> None:
    rows = [noop.using(queue=q).row({"key": f"k{i}"}) for i, q in enumerate(["emails", "default", "emails"])]
    from ultimate_jobs.enqueue import submit

    results = submit(rows)
    assert [r.id for r in results] == [r.id for r in rows]
    assert {r[0] for r in raw(ROUTED, JOBS)} == {rows[0].id, rows[2].id}
    assert [r[0] for r in raw("default", JOBS)] == [rows[1].id]


def test_inside_a_transaction_on_default_the_routed_job_is_staged_there_and_the_relay_delivers_it(routed) -> None:
    with transaction.atomic():
        staged = noop.using(queue="emails").enqueue(key="staged-secret-4411")
        assert staged.staged
        # Nothing reaches the routed database before the caller's commit.
        assert raw(ROUTED, "SELECT count(*) FROM ultimate_jobs_job") == [(0,)]
    outbox = raw("default", STAGED)
    assert [(r[0], r[1], r[3]) for r in outbox] == [(staged.id, "emails", None)]
    assert "staged-secret-4411" in outbox[0][2]
    assert Relay(database="default").run_once() == 1
    assert raw(ROUTED, JOBS) == [(staged.id, "emails", "staged-secret-4411")]
    assert raw("default", "SELECT count(*) FROM ultimate_jobs_job") == [(0,)]
    assert raw("default", "SELECT job_id FROM ultimate_jobs_outboxentry WHERE published_at IS NOT NULL") == [
        (staged.id,)]


def test_a_rolled_back_transaction_stages_nothing_anywhere(routed) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        noop.using(queue="emails").enqueue(key="rolled-back")
        raise RuntimeError("roll back")
    assert raw("default", "SELECT count(*) FROM ultimate_jobs_outboxentry") == [(0,)]
    assert raw(ROUTED, "SELECT count(*) FROM ultimate_jobs_outboxentry") == [(0,)]
    assert raw(ROUTED, "SELECT count(*) FROM ultimate_jobs_job") == [(0,)]


def test_a_relay_that_died_after_the_routed_insert_publishes_the_row_again_without_a_second_job(routed) -> None:
    """The routed insert commits before the mark (two databases, no shared transaction): the next
    claim finds the job already there under the staged id and only marks the row."""
    with transaction.atomic():
        staged = noop.using(queue="emails").enqueue(key="twice")
    relay = Relay(database="default")
    batch = relay.store.outbox_claim(relay_id=relay.relay_id, limit=10, lease=30.0, now=None)
    with transaction.atomic(using="default"):
        relay._insert_routed(batch)  # the insert on the routed database commits; the mark never runs
        transaction.set_rollback(True, using="default")
    assert raw(ROUTED, "SELECT id FROM ultimate_jobs_job") == [(staged.id,)]
    relay.store.outbox_release(ids=[r.id for r in batch], relay_id=relay.relay_id)
    assert relay.run_once() == 1
    assert raw(ROUTED, "SELECT id FROM ultimate_jobs_job") == [(staged.id,)]
    assert raw("default", "SELECT job_id FROM ultimate_jobs_outboxentry WHERE published_at IS NOT NULL") == [
        (staged.id,)]


def test_inside_a_transaction_on_the_routed_database_the_job_is_staged_there(routed) -> None:
    with transaction.atomic(using=ROUTED):
        staged = noop.using(queue="emails").enqueue(key="on-routed")
    assert [r[0] for r in raw(ROUTED, STAGED)] == [staged.id]
    assert raw("default", "SELECT count(*) FROM ultimate_jobs_outboxentry") == [(0,)]
    assert Relay(database=ROUTED).run_once() == 1
    assert raw(ROUTED, "SELECT id FROM ultimate_jobs_job") == [(staged.id,)]
