"""UltimateJobsBackend under Django's own contract (the behaviours of Django's tests/tasks and the
backport's backend tests), run by a real worker: enqueue, results, status, errors, context."""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from tests.integration.contrib_tasks.conftest import drain
from tests.support import django_tasks as tasks
from ultimate_jobs import JobsError, ops
from ultimate_jobs.contrib.tasks import UltimateJobsBackend
from ultimate_jobs.contrib.tasks.framework import (
    InvalidTaskError,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task,
    task_backends,
    task_enqueued,
    task_finished,
    task_started,
)
from ultimate_jobs.models import Job, OutboxEntry

pytestmark = pytest.mark.django_db(transaction=True)


def nothing_written() -> bool:
    return not Job.objects.exists() and not OutboxEntry.objects.exists()


def test_the_backend_is_configured_with_every_supports_flag() -> None:
    backend = task_backends["default"]
    assert isinstance(backend, UltimateJobsBackend)
    assert (backend.supports_defer, backend.supports_async_task, backend.supports_get_result,
            backend.supports_priority) == (True, True, True, True)


def test_enqueue_answers_a_ready_result_whose_id_is_the_job_id() -> None:
    result = tasks.calculate.enqueue(2, 3, label="total")
    assert result.status == TaskResultStatus.READY and not result.is_finished
    assert (result.args, result.kwargs, result.task.func, result.backend) == (
        [2, 3], {"label": "total"}, tasks.calculate.func, "default")
    assert result.enqueued_at is not None and result.started_at is None and result.finished_at is None
    assert result.errors == [] and result.worker_ids == []
    row = Job.objects.get(id=result.id)
    assert (row.name, row.queue, row.state, row.max_attempts) == ("django_tasks", "default", "ready", 1)
    with pytest.raises(ValueError, match="not finished"):
        result.return_value  # noqa: B018


def test_get_result_right_after_enqueue_equals_the_enqueues_answer() -> None:
    # Django's own backend tests assert equality: enqueued_at is the row's (the database's clock),
    # never a Python clock read beside it.
    direct = tasks.calculate.enqueue(2, 3, label="direct")
    assert tasks.calculate.get_result(direct.id) == direct
    assert direct.enqueued_at == Job.objects.get(id=direct.id).created_at
    with transaction.atomic():  # staged in the outbox: its staged_at is the enqueue time
        staged = tasks.calculate.enqueue(4, 5, label="staged")
        assert tasks.calculate.get_result(staged.id) == staged
        assert staged.enqueued_at == OutboxEntry.objects.get(id=staged.id).staged_at


def test_a_worker_runs_the_task_and_the_result_reads_back_exactly() -> None:
    result = tasks.calculate.enqueue(2, 3, label="total")
    drain(worker_id="w-calc")
    assert tasks.CALLS == [("calculate", (2, 3, "total"))]
    assert result.status == TaskResultStatus.READY  # a result is a snapshot until refreshed
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL and result.is_finished
    assert result.return_value == {"label": "total", "value": 5, "items": [2, 3]}
    assert result.worker_ids == ["w-calc"] and result.attempts == 1 and result.errors == []
    assert result.enqueued_at <= result.started_at <= result.last_attempted_at <= result.finished_at
    again = tasks.calculate.get_result(result.id)
    assert (again.id, again.status, again.args, again.kwargs, again.return_value) == (
        result.id, TaskResultStatus.SUCCESSFUL, [2, 3], {"label": "total"}, result.return_value)
    fetched = asyncio.run(task_backends["default"].aget_result(result.id))
    assert fetched.return_value == result.return_value


def test_an_async_enqueue_and_an_async_task_run() -> None:
    result = asyncio.run(tasks.async_add.aenqueue(4, 5))
    drain()
    result.refresh()
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, 9)


def test_get_result_of_an_unknown_id_raises_the_frameworks_exception() -> None:
    backend = task_backends["default"]
    for unknown in ("00000000-0000-7000-8000-000000000000", "not-a-uuid"):
        with pytest.raises(TaskResultDoesNotExist):
            backend.get_result(unknown)


def test_a_failure_is_failed_with_its_class_path_and_a_redacted_traceback_and_no_retry() -> None:
    result = tasks.failing.enqueue("card declined api_key=sk_live_123")
    drain(worker_id="w-fail")
    result.refresh()
    assert result.status == TaskResultStatus.FAILED and result.is_finished
    (error,) = result.errors
    assert error.exception_class_path == "builtins.ValueError" and error.exception_class is ValueError
    assert error.traceback.strip().splitlines()[-1].startswith("ValueError: card declined")
    assert "sk_live_123" not in error.traceback
    assert result.worker_ids == ["w-fail"] and Job.objects.get(id=result.id).attempt == 1
    with pytest.raises(ValueError, match="failed"):
        result.return_value  # noqa: B018


def test_a_return_value_that_is_not_json_fails_the_task() -> None:
    result = tasks.unserializable.enqueue()
    drain()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.errors[0].exception_class_path == "builtins.TypeError"


def test_system_exit_fails_the_task_and_the_worker_goes_on() -> None:
    exited = tasks.exits.enqueue(3)
    after = tasks.record.enqueue("after the exit")
    drain(concurrency=1)
    exited.refresh()
    after.refresh()
    assert exited.status == TaskResultStatus.FAILED
    assert exited.errors[0].exception_class_path == "builtins.SystemExit"
    assert exited.errors[0].exception_class is SystemExit
    assert exited.errors[0].traceback.strip().endswith("SystemExit: 3")
    assert (after.status, after.return_value) == (TaskResultStatus.SUCCESSFUL, "after the exit")


def test_priority_larger_runs_sooner_and_the_job_keeps_its_own_value() -> None:
    low = tasks.record.using(priority=-10).enqueue("low")
    high = tasks.record.using(priority=50).enqueue("high")
    middle = tasks.record.enqueue("middle")
    assert [Job.objects.get(id=r.id).priority for r in (low, high, middle)] == [10, -50, 0]
    assert ops.get_job(high.id)["priority"] == -50
    assert task_backends["default"].get_result(high.id).task.priority == 50
    drain(concurrency=1)
    assert [v for kind, v in tasks.CALLS] == ["high", "middle", "low"]


def test_run_after_defers_the_task_and_it_reads_ready_until_then() -> None:
    later = timezone.now() + timedelta(hours=1)
    result = tasks.record.using(run_after=later).enqueue("later")
    drain()
    result.refresh()
    assert result.status == TaskResultStatus.READY and tasks.CALLS == []
    assert Job.objects.get(id=result.id).state == "delayed"
    assert result.task.run_after == later


def test_queue_name_picks_the_jobs_queue() -> None:
    result = tasks.send_email.enqueue("ada@example.com")
    other = tasks.record.using(queue_name="queue-1").enqueue("q1")
    assert Job.objects.get(id=result.id).queue == "emails" and Job.objects.get(id=other.id).queue == "queue-1"
    drain()
    result.refresh()
    assert result.return_value == "sent to ada@example.com"


@pytest.mark.parametrize("make", [
    lambda: tasks.record.using(priority=101),
    lambda: tasks.record.using(priority=-101),
    lambda: tasks.record.using(queue_name="unknown-queue"),
    lambda: tasks.record.using(run_after=datetime(2030, 1, 1)),  # naive  # noqa: DTZ001
    lambda: task()(lambda: None),  # not a module-level function
], ids=["priority-high", "priority-low", "unknown-queue", "naive-run-after", "not-module-level"])
def test_invalid_tasks_raise_the_frameworks_exception_and_write_nothing(make: Any) -> None:
    with pytest.raises(InvalidTaskError):
        make().enqueue("x")
    assert nothing_written()


@pytest.mark.parametrize("args", [(datetime(2030, 1, 1, tzinfo=UTC),), ({1: "int key"},), (object(),)],
                         ids=["datetime", "int-key", "object"])
def test_arguments_that_do_not_round_trip_json_raise_type_error_and_write_nothing(args: tuple[Any, ...]) -> None:
    with pytest.raises(TypeError):
        tasks.record.enqueue(*args)
    assert nothing_written()


def test_a_tuple_argument_reads_back_as_a_list() -> None:
    result = tasks.calculate.enqueue(1, 2, label="t")
    assert tasks.calculate.get_result(result.id).args == [1, 2]


def test_takes_context_gives_the_task_context_of_this_result() -> None:
    result = tasks.with_context.enqueue(7)
    drain(worker_id="w-context")
    result.refresh()
    assert result.return_value == {"id": result.id, "attempt": 1, "value": 7,
                                   "status": str(TaskResultStatus.RUNNING), "workers": ["w-context"]}


def test_the_frameworks_signals_are_sent_with_the_result() -> None:
    seen: list[tuple[str, str, str]] = []

    def on(name: str) -> Any:
        def receiver(sender: type, task_result: Any, **kwargs: Any) -> None:
            seen.append((name, task_result.id, str(task_result.status)))
        return receiver

    receivers = {"enqueued": on("enqueued"), "started": on("started"), "finished": on("finished")}
    task_enqueued.connect(receivers["enqueued"])
    task_started.connect(receivers["started"])
    task_finished.connect(receivers["finished"])
    try:
        ok = tasks.record.enqueue("signals")
        bad = tasks.failing.enqueue("boom")
        drain(concurrency=1)
    finally:
        task_enqueued.disconnect(receivers["enqueued"])
        task_started.disconnect(receivers["started"])
        task_finished.disconnect(receivers["finished"])
    for result, final in ((ok, TaskResultStatus.SUCCESSFUL), (bad, TaskResultStatus.FAILED)):
        mine = [(name, status) for name, rid, status in seen if rid == result.id]
        assert mine == [("enqueued", str(TaskResultStatus.READY)), ("started", str(TaskResultStatus.RUNNING)),
                        ("finished", str(final))]


def test_get_result_of_another_task_raises_a_mismatch() -> None:
    result = tasks.record.enqueue("mine")
    with pytest.raises(Exception, match="Task does not match"):
        tasks.calculate.get_result(result.id)


def test_a_row_naming_something_that_is_not_a_task_never_calls_it() -> None:
    result = tasks.record.enqueue("planted")
    job = Job.objects.get(id=result.id)
    job.payload = {**job.payload, "task": "subprocess.check_output", "args": [["touch", "/tmp/uj-never"]]}
    job.save(update_fields=["payload"])
    drain(worker_id="w-guard")
    row = Job.objects.get(id=result.id)
    assert row.state == "dead" and "does not point to a Task" in row.last_error
    assert row.last_error.strip().splitlines()[-1].startswith("django.core.exceptions.SuspiciousOperation")


@pytest.mark.parametrize("path", ["tests.support.import_side_effect.not_a_task", "tests.support.import_side_effect",
                                  "tests.support.import_side_effect.missing"])
def test_a_row_naming_a_module_outside_the_project_never_imports_it(path: str, tmp_path, monkeypatch) -> None:
    marker = tmp_path / "imported"
    monkeypatch.setenv("UJ_IMPORT_SIDE_EFFECT", str(marker))
    assert "tests.support.import_side_effect" not in sys.modules
    result = tasks.record.enqueue("planted")
    job = Job.objects.get(id=result.id)
    assert job.payload["task_sig"]  # the backend signs what it writes; the planted path keeps the old signature
    job.payload = {**job.payload, "task": path, "args": []}
    job.save(update_fields=["payload"])
    drain(worker_id="w-guard")
    row = Job.objects.get(id=result.id)
    assert not marker.exists() and "tests.support.import_side_effect" not in sys.modules
    assert (row.state, row.error_code) == ("dead", "X_TASK_PATH_REFUSED"), row.last_error
    assert tasks.CALLS == []
    with pytest.raises(JobsError) as refused:
        tasks.record.get_result(result.id)
    assert refused.value.code == "X_TASK_PATH_REFUSED" and not marker.exists()


def test_only_the_paths_own_signature_lets_a_module_outside_the_apps_be_imported() -> None:
    from ultimate_jobs.contrib.tasks.declared import load_task, sign_path

    path = "tests.support.import_side_effect.not_a_task"
    assert "tests.support.import_side_effect" not in sys.modules
    with pytest.raises(JobsError):
        load_task(path, sign_path("tests.support.django_tasks.record"))  # another path's signature
    assert "tests.support.import_side_effect" not in sys.modules
    with pytest.raises(Exception, match="does not point to a Task"):  # signed: imported, then checked
        load_task(path, sign_path(path))
    # Forgotten whole: the import also bound the module on its package, where a later lookup of
    # the bare module path would find it without importing anything.
    sys.modules.pop("tests.support.import_side_effect", None)
    vars(sys.modules["tests.support"]).pop("import_side_effect", None)


def test_a_worker_runs_only_the_queues_it_was_given(make_worker) -> None:
    other = tasks.record.using(queue_name="queue-1").enqueue("elsewhere")
    make_worker(queues=["default"], burst=True).run(install_signals=False)
    assert tasks.CALLS == [] and Job.objects.get(id=other.id).state == "ready"
    drain()
    assert tasks.CALLS == [("record", "elsewhere")]
