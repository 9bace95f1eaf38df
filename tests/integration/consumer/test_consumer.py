"""consumer(): batches committed with their cursor, linger, the arm and its supervisor, the report
in get_job, and the refusals."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import transaction

from tests.app.models import Effect
from tests.support import consumer_jobs
from tests.support.consumer_jobs import numbers
from ultimate_jobs import NO_TENANT, JobsError, consumer, ops, registered_tasks
from ultimate_jobs.models import Job
from ultimate_jobs.registry import get_job_handle
from ultimate_jobs.registry import unregister as _unregister
from ultimate_jobs.schedule.declarations import _unregister as _unregister_task
from ultimate_jobs.testing import run_job

pytestmark = pytest.mark.django_db(transaction=True)


def items(key: str) -> list[int]:
    return sorted(int(k.rsplit(":", 1)[1]) for k in Effect.objects.filter(key__startswith=f"item:{key}:")
                  .values_list("key", flat=True))


@pytest.fixture
def temporary() -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    for name in names:
        for suffix in ("", ".arm"):
            _unregister(name + suffix)
        _unregister_task(f"{name}.supervisor")


def test_a_run_commits_every_batch_with_its_cursor_and_reports_it() -> None:
    trace = run_job(numbers, key="a")
    assert (trace.state, trace.result) == ("done", {"key": "a", "batches": 5, "items": 50})
    assert items("a") == list(range(1, 51))  # each item once
    assert consumer_jobs.load("a") == 50
    job = ops.get_job(trace.id)
    assert job["consumer"]["key"] == "a" and job["consumer"]["lag"] == 0
    assert job["consumer"]["last_batch_at"] is not None
    assert job["progress"]["done"] == 50 and job["progress"]["total"] == 50
    again = run_job(numbers, key="a")  # the cursor is where the last batch left it: nothing new
    assert again.result == {"key": "a", "batches": 0, "items": 0} and items("a") == list(range(1, 51))


def test_the_key_the_concurrency_and_the_supervisor() -> None:
    first = numbers.enqueue(key="a")
    assert Job.objects.get(id=first.id).idempotency_key == "consumer:tests.consumer.numbers:a"
    assert numbers.enqueue(key="a").deduped is True
    assert numbers.describe()["concurrency"] == {"limit": 1, "keyed": True, "when_busy": "wait"}
    assert numbers.concurrency_key_for(key="a") == "tests.consumer.numbers:a"
    assert numbers.timeout is None
    supervisor = next(t for t in registered_tasks() if t.name == "tests.consumer.numbers.supervisor")
    assert (supervisor.cron, supervisor.tz, supervisor.job.name) == ("* * * * *", "UTC", "tests.consumer.numbers.arm")


def test_the_arm_enqueues_each_key_once_while_live() -> None:
    arm = get_job_handle("tests.consumer.numbers.arm")
    first = run_job(arm)
    assert first.result == {"keys": 2, "started": 2}
    assert sorted(Job.objects.filter(name=numbers.name).values_list("payload__key", flat=True)) == ["a", "b"]
    Job.objects.filter(id=first.id).delete()
    second = run_job(arm)
    assert second.result == {"keys": 2, "started": 0}  # both keys live: deduplicated, nothing armed twice
    assert Job.objects.filter(name=numbers.name).count() == 2


def test_a_partly_filled_batch_commits_after_the_linger(temporary: list[str]) -> None:
    sizes: list[int] = []
    seen_at: list[float] = []
    committed = threading.Event()

    def slow_stream(*, key: str, cursor: Any, cancel: Any) -> Any:
        yield from ({"n": n} for n in (1, 2, 3))
        committed.wait(5)  # the stream goes quiet until the first three were committed
        seen_at.append(time.monotonic())
        yield from ({"n": n} for n in (4, 5))

    def handle(batch: list[dict[str, int]], *, key: str) -> int:
        sizes.append(len(batch))
        committed.set()
        return batch[-1]["n"]

    quiet = consumer(name="tests.consumer.quiet", tenant=NO_TENANT, keys=lambda: ["q"], open=slow_stream,
                     handle=handle, cursor=(lambda key: 0, lambda key, n: None), batch=100)
    temporary.append(quiet.name)
    trace = run_job(quiet, key="q")
    assert trace.state == "done" and sizes == [3, 2]


def test_handle_and_save_share_one_transaction(temporary: list[str]) -> None:
    def handle(batch: list[dict[str, int]], *, key: str) -> int:
        Effect.objects.create(key=f"item:{key}:{batch[0]['n']}")
        return batch[-1]["n"]

    def save(key: str, following: int) -> None:
        assert transaction.get_connection().in_atomic_block
        raise RuntimeError("the cursor table is down")

    broken = consumer(name="tests.consumer.broken", tenant=NO_TENANT, keys=lambda: ["x"],
                      open=lambda *, key, cursor, cancel: iter([{"n": 1}]), handle=handle,
                      cursor=(lambda key: 0, save), retry=1)
    temporary.append(broken.name)
    trace = run_job(broken, key="x")
    assert trace.state == "dead"
    assert items("x") == []  # the batch's effect rolled back with the cursor save


def test_a_self_enqueue_is_terminal(temporary: list[str]) -> None:
    holder: dict[str, Any] = {}

    def handle(batch: list[Any], *, key: str) -> int:
        holder["self"].enqueue(key="other")
        return 1

    looping = consumer(name="tests.consumer.looping", tenant=NO_TENANT, keys=lambda: ["x"],
                       open=lambda *, key, cursor, cancel: iter([{"n": 1}]), handle=handle,
                       cursor=(lambda key: 0, lambda key, n: None))
    temporary.append(looping.name)
    holder["self"] = looping
    trace = run_job(looping, key="x")
    assert (trace.state, trace.attempt, trace.error_code) == ("dead", 1, "X_CONSUMER_SELF_ENQUEUE")
    assert not Job.objects.filter(name=looping.name, payload__key="other").exists()


@pytest.mark.parametrize("bad", [{"timeout": "1m"}, {"cursor": None}, {"cursor": (lambda k: 0,)},
                                 {"batch": 0}, {"batch": 1.5}, {"rearm": "7m"}, {"rearm": "90s"}, {"rearm": "2h"},
                                 {"keys": None}, {"open": "x"}, {"handle": None}, {"tenant": None},
                                 {"unknown_option": 1}])
def test_declaration_refusals_are_jobs_errors(bad: dict[str, Any]) -> None:
    good: dict[str, Any] = {"name": "tests.consumer.refused", "tenant": NO_TENANT, "keys": lambda: [],
                            "open": lambda **_: iter(()), "handle": lambda items, key: None,
                            "cursor": (lambda key: None, lambda key, n: None)}
    with pytest.raises(JobsError) as err:
        consumer(**{**good, **bad})
    assert err.value.code == "X_CONSUMER_INVALID"
    assert get_job_handle("tests.consumer.refused") is None
    assert not any(t.name.startswith("tests.consumer.refused") for t in registered_tasks())


def test_rearm_becomes_the_supervisor_cron(temporary: list[str]) -> None:
    for rearm, cron in (("5m", "*/5 * * * *"), ("1h", "0 * * * *"), (900, "*/15 * * * *")):
        name = f"tests.consumer.rearm{len(temporary)}"
        consumer(name=name, tenant=NO_TENANT, keys=lambda: [], open=lambda **_: iter(()),
                 handle=lambda items, key: None, cursor=(lambda key: None, lambda key, n: None), rearm=rearm)
        temporary.append(name)
        assert next(t for t in registered_tasks() if t.name == f"{name}.supervisor").cron == cron
