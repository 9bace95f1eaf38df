"""``aenqueue``, ``aenqueue_many`` and ``using(...).aenqueue`` from async code, on PostgreSQL and on
SQLite: the sync call's answers and refusals, no ``SynchronousOnlyOperation``, an event loop that
keeps running while the statement waits on a lock another connection holds, and the outbox staged
from a ``sync_to_async`` function that opens ``transaction.atomic()``."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import SynchronousOnlyOperation
from django.db import connection, transaction
from django.test import override_settings

from tests.app.jobs import noop, tenant_noop
from tests.conftest import BACKEND
from ultimate_jobs import MAX_ENQUEUE_BATCH, NO_TENANT, JobsError, ops
from ultimate_jobs.models import Job, OutboxEntry
from ultimate_jobs.outbox import Relay

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("shared_thread_connections_closed")]


def refusal(coro: Any) -> str:
    with pytest.raises(JobsError) as err:
        asyncio.run(coro)
    return err.value.code


def test_aenqueue_answers_what_enqueue_answers(declare) -> None:
    @declare(idempotency_key="{key}", tenant=NO_TENANT)
    def keyed(ctx, *, key: str, note: str) -> None: ...

    async def main() -> tuple[Any, ...]:
        first = await keyed.aenqueue(key="a", note="first")
        again = await keyed.aenqueue(key="a", note="second")
        routed = await keyed.using(queue="slow", priority=-5, delay="10m").aenqueue(key="b", note="later")
        many = await keyed.aenqueue_many([{"key": "c", "note": "1"}, {"key": "c", "note": "2"},
                                          {"key": "a", "note": "3"}])
        bound_many = await keyed.using(queue="slow").aenqueue_many([{"key": "d", "note": "4"}])
        return first, again, routed, many, bound_many

    first, again, routed, many, bound_many = asyncio.run(main())
    assert (first.deduped, first.staged) == (False, False)
    assert (again.id, again.deduped, again.staged) == (first.id, True, False)
    assert ops.get_job(first.id)["payload"] == {"key": "a", "note": "first"}  # first payload wins
    row = Job.objects.get(id=routed.id)
    assert (row.queue, row.priority, row.state) == ("slow", -5, "delayed")
    assert [(r.deduped, r.staged) for r in many] == [(False, False), (True, False), (True, False)]
    assert many[0].id == many[1].id and many[2].id == first.id
    assert Job.objects.get(id=bound_many[0].id).queue == "slow"
    assert Job.objects.count() == 4


def test_aenqueue_refuses_with_the_sync_calls_codes_and_writes_nothing() -> None:
    assert refusal(noop.aenqueue(key="x", extra=1)) == "X_JOB_INPUT_INVALID"
    assert refusal(noop.aenqueue()) == "X_JOB_INPUT_INVALID"
    assert refusal(tenant_noop.using(tenant_id="globex").aenqueue(key="x", org="acme")) == "X_JOB_TENANT_MISMATCH"
    assert refusal(noop.aenqueue_many([{"key": "ok"}, {"nope": 1}])) == "X_JOB_INPUT_INVALID"
    assert refusal(noop.aenqueue_many([{"key": str(n)} for n in range(MAX_ENQUEUE_BATCH + 1)])) == (
        "X_JOB_ENQUEUE_BATCH_TOO_LARGE")
    with pytest.raises(TypeError):
        asyncio.run(noop.aenqueue("positional"))  # type: ignore[call-arg]
    assert Job.objects.count() == 0 and OutboxEntry.objects.count() == 0


def test_from_a_running_loop_enqueue_is_refused_by_django_and_aenqueue_is_not() -> None:
    async def main() -> tuple[str, Any]:
        try:
            noop.enqueue(key="sync")
        except SynchronousOnlyOperation:
            sync = "SynchronousOnlyOperation"
        else:
            sync = "written"
        return sync, await noop.aenqueue(key="async")

    sync, result = asyncio.run(main())
    assert sync == "SynchronousOnlyOperation"  # why aenqueue exists
    assert list(Job.objects.values_list("id", flat=True)) == [result.id]


@override_settings(ULTIMATE_JOBS={"OUTBOX": "required"})
def test_from_async_code_the_enqueue_is_direct_so_outbox_required_refuses_it() -> None:
    assert refusal(noop.aenqueue(key="x")) == "X_OUTBOX_NO_TX"
    assert Job.objects.count() == 0 and OutboxEntry.objects.count() == 0


def test_staging_inside_a_sync_to_async_transaction_works_unchanged() -> None:
    def order(key: str, *, fail: bool) -> Any:
        with transaction.atomic():
            staged = noop.enqueue(key=key)
            if fail:
                raise RuntimeError("the order failed: the job never existed")
        return staged

    async def main() -> Any:
        staged = await sync_to_async(order)("kept", fail=False)
        with pytest.raises(RuntimeError):
            await sync_to_async(order)("gone", fail=True)
        return staged

    staged = asyncio.run(main())
    assert (staged.staged, staged.deduped) == (True, None)
    assert OutboxEntry.objects.count() == 1 and Job.objects.count() == 0
    Relay().drain()
    assert list(Job.objects.values_list("id", "payload")) == [(staged.id, {"key": "kept"})]


@pytest.fixture
def write_lock() -> Iterator[Any]:
    """A second connection (not Django's) holding a lock that stops every insert into the job table
    until ``release()``: PostgreSQL's ``LOCK TABLE``, SQLite's write lock (``BEGIN IMMEDIATE``)."""
    settings = connection.settings_dict
    if BACKEND == "postgres":
        import psycopg

        other: Any = psycopg.connect(dbname=settings["NAME"], user=settings["USER"], host=settings["HOST"] or None,
                                     port=settings["PORT"] or None, password=settings["PASSWORD"] or None)
        other.execute("LOCK TABLE ultimate_jobs_job IN SHARE ROW EXCLUSIVE MODE")  # opens a transaction
    else:
        other = sqlite3.connect(settings["NAME"], isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")
    yield other
    if BACKEND == "postgres":
        other.rollback()
    elif other.in_transaction:
        other.execute("ROLLBACK")
    other.close()


def test_the_event_loop_runs_other_coroutines_while_the_statement_waits(write_lock: Any) -> None:
    async def main() -> tuple[int, bool, Any, int]:
        enqueue = asyncio.ensure_future(noop.aenqueue(key="held"))
        ticks = 0
        while ticks < 30:  # 0.3 s of another coroutine's progress, the statement held meanwhile
            await asyncio.sleep(0.01)
            ticks += 1
        held = not enqueue.done()
        if BACKEND == "postgres":  # the insert is in the server, waiting on the lock
            (waiting,) = write_lock.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND query LIKE '%%INSERT INTO ultimate_jobs_job%%'").fetchone()
            held = held and waiting == 1
            write_lock.commit()
        else:
            write_lock.execute("COMMIT")
        result = await enqueue
        return ticks, held, result, await sync_to_async(Job.objects.count)()

    ticks, held, result, count = asyncio.run(main())
    assert ticks == 30 and held  # the loop ticked on while the insert waited on the lock
    assert (result.deduped, result.staged, count) == (False, False, 1)
