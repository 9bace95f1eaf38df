"""A large enqueue_many on PostgreSQL goes by binary COPY (db/postgres/inserts.py) and keeps every
guarantee of the INSERT path: dedupe on the live key with the first payload winning, answers in
input order, one transaction, and a key taken between the look-up and the COPY handed to the
INSERT's ON CONFLICT instead of an error."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from tests.app.jobs import noop
from ultimate_jobs.db import store_for
from ultimate_jobs.db.postgres import inserts
from ultimate_jobs.models import Job, OutboxEntry

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres_only]

N = inserts.COPY_MIN_ROWS + 100


def _copies(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the COPY path's calls and how many of them wrote (did not hand back to the INSERT)."""
    calls: list[int] = []
    real = inserts.InsertStatements.job_copy_many

    def counting(self, **kwargs):  # type: ignore[no-untyped-def]
        answer = real(self, **kwargs)
        calls.append(0 if answer is None else len(answer))
        return answer

    monkeypatch.setattr(inserts.InsertStatements, "job_copy_many", counting)
    return calls


def test_enqueue_many_of_10000_is_one_copy_with_answers_in_input_order(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _copies(monkeypatch)
    live = noop.enqueue(key="k-17")
    inputs = [{"key": f"k-{i}"} for i in range(9_999)] + [{"key": "k-3"}]  # a repeat of an earlier input
    results = noop.enqueue_many(inputs)
    assert calls == [9_999]  # one COPY call answered every distinct key (the held one without writing it)
    assert results[17].id == live.id and results[17].deduped is True
    assert results[-1].id == results[3].id and results[-1].deduped is True and results[3].deduped is False
    assert all(r.deduped is False for i, r in enumerate(results[:-1]) if i != 17)
    assert all(r.run_id == r.id and r.staged is False for i, r in enumerate(results[:-1]) if i != 17)
    stored = dict(Job.objects.filter(id__in=[r.id for r in results[:50]]).values_list("id", "payload"))
    assert [stored[r.id] for r in results[:50]] == [{"key": f"k-{i}"} for i in range(50)]
    assert Job.objects.count() == 9_999
    assert connection.get_autocommit() and connection.connection.info.transaction_status == 0  # IDLE: committed


def test_a_key_taken_after_the_look_up_hands_the_batch_to_the_insert(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _copies(monkeypatch)
    taken = noop.enqueue(key="taken")
    # The look-up sees no held key, as if the other enqueue committed just after it: the COPY meets
    # the live-key index, writes nothing, and the INSERT's ON CONFLICT answers the dedupe.
    monkeypatch.setattr(inserts, "JOB_COPY_LOOKUP", inserts.JOB_COPY_LOOKUP.replace(
        "WHERE j.state IN", "WHERE false AND j.state IN"))
    results = noop.enqueue_many([{"key": "taken"}] + [{"key": f"n-{i}"} for i in range(N)])
    assert calls == [0]
    assert results[0].id == taken.id and results[0].deduped is True
    assert not any(r.deduped for r in results[1:])
    assert Job.objects.count() == N + 1


def test_inside_the_callers_transaction_the_copy_is_a_savepoint_of_it(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _copies(monkeypatch)
    store = store_for("default")
    first = noop.enqueue(key="held")
    monkeypatch.setattr(inserts, "JOB_COPY_LOOKUP", inserts.JOB_COPY_LOOKUP.replace(
        "WHERE j.state IN", "WHERE false AND j.state IN"))
    rows = [noop.using().row({"key": k}) for k in ["held"] + [f"r-{i}" for i in range(N)]]
    with pytest.raises(RuntimeError), transaction.atomic():
        noop.enqueue(key="before")  # staged in the outbox: the caller's own write, in its transaction
        answers = store.job_insert_many(rows=rows, now=None)  # as the relay writes, inside its transaction
        assert calls == [0] and answers[0].id == first.id and answers[0].deduped is True
        # The refused COPY rolled back only its savepoint: the caller's staged row is still there.
        assert Job.objects.count() == N + 1 and OutboxEntry.objects.count() == 1
        raise RuntimeError("the caller rolls back")
    assert list(Job.objects.values_list("id", flat=True)) == [first.id]  # ...and takes the batch with it
    assert not OutboxEntry.objects.exists()
    with transaction.atomic():
        assert store.job_insert_many(rows=rows[1:], now=None)[0].deduped is False
    assert Job.objects.count() == N + 1


def test_a_small_batch_stays_one_insert(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _copies(monkeypatch)
    noop.enqueue_many([{"key": f"s-{i}"} for i in range(inserts.COPY_MIN_ROWS - 1)])
    assert calls == []


def test_two_batches_racing_for_the_same_keys_make_one_job_per_key(monkeypatch: pytest.MonkeyPatch) -> None:
    # Two threads (two connections) enqueue overlapping keys in opposite orders, at once, three
    # times: each COPY may meet the other's uncommitted keys (a unique violation or a deadlock),
    # write nothing, and hand over to the INSERT path. No call fails; every key is one job.
    import threading

    from django.db import connections

    calls = _copies(monkeypatch)
    errors: list[BaseException] = []
    answers: dict[str, set] = {}
    lock = threading.Lock()

    def enqueue(keys: list[str], barrier: threading.Barrier) -> None:
        try:
            barrier.wait(timeout=10)
            results = noop.enqueue_many([{"key": k} for k in keys])
            with lock:
                for k, r in zip(keys, results, strict=True):
                    answers.setdefault(k, set()).add(r.id)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    for rnd in range(3):
        keys = [f"race-{rnd}-{i}" for i in range(N)]
        barrier = threading.Barrier(2)
        threads = [threading.Thread(target=enqueue, args=(keys, barrier)),
                   threading.Thread(target=enqueue, args=(list(reversed(keys)), barrier))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
    assert not errors, errors
    assert len(answers) == 3 * N and all(len(ids) == 1 for ids in answers.values())
    assert Job.objects.count() == 3 * N
    assert len(calls) == 6, calls  # every batch tried the COPY (how many handed over depends on the race)
