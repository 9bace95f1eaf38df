"""What UltimateJobsBackend does that django-tasks-db's DatabaseBackend does not: the outbox,
retries with backoff, durable steps through job_context (awaited in an ``async def`` task),
idempotency keys, redacted operator views."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.db import transaction
from django.test import override_settings
from django.utils import timezone

from tests.conftest import wait_for
from tests.integration.contrib_tasks.conftest import drain
from tests.support import django_tasks as tasks
from ultimate_jobs import Retry, ops
from ultimate_jobs.contrib.tasks import UltimateJobsBackend, job_context
from ultimate_jobs.contrib.tasks.framework import TaskResultDoesNotExist, TaskResultStatus, task_backends
from ultimate_jobs.db import store_for
from ultimate_jobs.errors import X_TASK_CONTEXT_INVALID, X_TASK_RETRY, X_TASKS_UNAVAILABLE, JobsError
from ultimate_jobs.models import Job, OutboxEntry
from ultimate_jobs.outbox import Relay

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_enqueue_inside_a_rolled_back_transaction_never_existed() -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        result = tasks.record.enqueue("rolled back")
        assert result.status == TaskResultStatus.READY
        raise RuntimeError("the view failed")
    assert not Job.objects.exists() and not OutboxEntry.objects.exists()
    drain()
    assert tasks.CALLS == []


def test_an_enqueue_inside_a_committed_transaction_is_staged_then_published_and_run() -> None:
    with transaction.atomic():
        result = tasks.record.enqueue("committed")
        assert not Job.objects.filter(id=result.id).exists()  # staged in the outbox, not yet a job
    assert task_backends["default"].get_result(result.id).status == TaskResultStatus.READY
    assert Relay(relay_id="r-tasks").run_once() == 1
    drain()
    result.refresh()
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, "committed")
    assert tasks.CALLS == [("record", "committed")]


def test_a_task_retry_policy_retries_with_one_error_and_one_worker_id_per_attempt() -> None:
    result = tasks.flaky.enqueue(2, "twice")
    assert Job.objects.get(id=result.id).max_attempts == 3
    drain(worker_id="w-retry")
    result.refresh()
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, "finally")
    assert [e.exception_class_path for e in result.errors] == ["builtins.RuntimeError"] * 2
    assert all(e.traceback.strip().endswith("RuntimeError: flaky twice failing") for e in result.errors)
    assert result.worker_ids == ["w-retry"] * 3 and result.attempts == 3
    assert result.started_at < result.last_attempted_at
    history = Job.objects.get(id=result.id).attempts
    assert [e["error_code"] for e in history] == [X_TASK_RETRY, X_TASK_RETRY, None]


def test_a_retry_policy_that_runs_out_fails_the_task() -> None:
    result = tasks.flaky.enqueue(5, "always")
    drain()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED and len(result.errors) == 3
    assert [kind for kind, _ in tasks.CALLS] == ["flaky"] * 3


def test_the_backends_retry_option_applies_to_every_task_without_its_own() -> None:
    backend = UltimateJobsBackend("default", {"QUEUES": ["default"], "OPTIONS": {"retry": Retry(attempts=4)}})
    result = backend.enqueue(tasks.record, ["opt-in"], {})
    assert Job.objects.get(id=result.id).max_attempts == 4
    assert Job.objects.get(id=tasks.record.enqueue("default").id).max_attempts == 1  # none by default


def test_job_context_gives_durable_steps_a_retry_replays_instead_of_running_again() -> None:
    result = tasks.durable.enqueue("order-7")
    drain()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"charged": "charge-order-7", "attempt": 2, "job_id": result.id}
    assert tasks.STEP_CALLS == ["order-7"]  # the charge ran once across both attempts
    assert [s["name"] for s in ops.get_job(result.id)["steps"]] == ["charge"]


def test_an_async_tasks_job_context_awaits_the_same_durable_steps() -> None:
    result = tasks.async_durable.enqueue("order-8")
    drain()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"charged": "charge-order-8", "shipped": "ship-order-8", "attempt": 2,
                                   "job_id": result.id}
    assert tasks.STEP_CALLS == ["order-8", "ship order-8"]  # each step ran once across both attempts
    job = ops.get_job(result.id)
    assert [(s["name"], s["executions"]) for s in job["steps"]] == [("charge", 1), ("ship", 1)]
    assert job["progress"] == {"done": 1, "total": 1, "note": "charged and shipped"}


def test_an_async_task_suspends_on_a_durable_sleep_and_resumes() -> None:
    result = tasks.async_napper.enqueue(0.2)
    drain()
    row = Job.objects.get(id=result.id)
    assert (row.state, row.attempt) == ("suspended", 0)
    assert tasks.async_napper.get_result(result.id).status == TaskResultStatus.READY  # waiting to run
    wait_for(lambda: Job.objects.get(id=result.id).run_at <= timezone.now(), timeout=10)
    drain()
    result.refresh()
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, "rested")


def test_aenqueue_and_aget_result_answer_as_the_sync_calls_do() -> None:
    async def main() -> tuple[Any, Any]:
        return await tasks.record.aenqueue("a"), await tasks.record.aenqueue("b")

    first, second = asyncio.run(main())
    assert first.id != second.id  # each enqueue is its own job, as enqueue's are
    with pytest.raises(TypeError):
        asyncio.run(tasks.record.aenqueue(datetime.now(UTC)))  # type: ignore[arg-type]  # not JSON
    with pytest.raises(TaskResultDoesNotExist):
        asyncio.run(tasks.record.aget_result("00000000-0000-7000-8000-000000000000"))
    fetched = asyncio.run(tasks.record.aget_result(first.id))
    assert (fetched.id, fetched.status, fetched.args) == (first.id, TaskResultStatus.READY, ["a"])
    assert Job.objects.count() == 2


def test_job_context_refuses_a_context_that_is_not_the_running_tasks() -> None:
    with pytest.raises(JobsError) as caught:
        job_context(object())
    assert caught.value.code == X_TASK_CONTEXT_INVALID


def idempotency_key(task: Any, args: list[Any], kwargs: dict[str, Any]) -> str:
    return f"{task.name}:{args[0]}"


@override_settings(TASKS={"default": {"BACKEND": "ultimate_jobs.contrib.tasks.UltimateJobsBackend",
                                      "QUEUES": ["default", "emails", "queue-1"],
                                      "OPTIONS": {"key": f"{__name__}.idempotency_key"}}})
def test_the_key_option_deduplicates_a_live_task() -> None:
    first = tasks.record.enqueue("same")
    second = tasks.record.enqueue("same")
    other = tasks.record.enqueue("other")
    assert first.id == second.id != other.id
    assert Job.objects.count() == 2


def test_operators_see_the_task_as_a_job_with_its_secrets_redacted(admin_client: Any) -> None:
    result = tasks.send_email.enqueue("ada@example.com", password="hunter2-secret")
    shown = ops.get_job(result.id)
    assert shown["name"] == "django_tasks" and shown["queue"] == "emails"
    assert shown["payload"]["task"] == "tests.support.django_tasks.send_email"
    assert shown["payload"]["kwargs"]["password"] != "hunter2-secret"
    assert "hunter2-secret" not in str(shown)
    page = admin_client.get(f"/admin/ultimate_jobs/job/{result.id}/change/").content.decode()
    assert "send_email" in page and "hunter2-secret" not in page
    assert task_backends["default"].get_result(result.id).kwargs["password"] == "hunter2-secret"  # the owner's view
    out = StringIO()
    call_command("jobs", "show", str(result.id), stdout=out)
    assert "tests.support.django_tasks.send_email" in out.getvalue() and "hunter2-secret" not in out.getvalue()


def test_each_task_is_shown_and_filtered_by_its_own_path(admin_client: Any) -> None:
    calculated = tasks.calculate.enqueue(1, 2)
    recorded = tasks.record.enqueue("by path")
    path = "tests.support.django_tasks.calculate"
    (row,) = ops.list_jobs(name=path)["jobs"]
    assert (row["id"], row["name"], row["task"]) == (calculated.id, "django_tasks", path)
    assert ops.get_job(recorded.id)["task"] == "tests.support.django_tasks.record"
    assert {j["id"] for j in ops.list_jobs(name="django_tasks")["jobs"]} == {calculated.id, recorded.id}
    assert ops.remove_many(state="ready", name=path, dry_run=True)["remaining"] == 1  # bulk filters read it too
    out = StringIO()
    call_command("jobs", "ls", stdout=out)
    rows = [[c.strip() for c in line.split("\u2502")[1:-1]] for line in out.getvalue().splitlines() if "\u2502" in line]
    names = sorted(row[3] for row in rows)  # rich may cut a long cell short with an ellipsis
    assert names[0].startswith("tests.support.django_tasks.calcula") and names[1] == "tests.support.django_tasks.record"
    out = StringIO()
    call_command("jobs", "ls", "--name", path, "--json", stdout=out)
    assert [j["id"] for j in json.loads(out.getvalue())["jobs"]] == [calculated.id]
    changelist = admin_client.get("/admin/ultimate_jobs/job/")
    html = changelist.content.decode()
    assert f'href="?name={path}"' in html and "tests.<wbr>support.<wbr>django_tasks.<wbr>calculate" in html
    filtered = admin_client.get("/admin/ultimate_jobs/job/", {"name": path})
    assert [str(j.id) for j in filtered.context["cl"].result_list] == [calculated.id]
    page = admin_client.get(f"/admin/ultimate_jobs/job/{calculated.id}/change/").content.decode()
    assert f"{path} <span" in page


def test_without_any_tasks_framework_the_import_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib
    import sys

    monkeypatch.setitem(sys.modules, "django.tasks", None)  # neither Django 6's framework...
    monkeypatch.setitem(sys.modules, "django_tasks", None)  # ...nor the backport imports
    monkeypatch.delitem(sys.modules, "ultimate_jobs.contrib.tasks.framework")
    with pytest.raises(JobsError) as caught:
        importlib.import_module("ultimate_jobs.contrib.tasks.framework")
    assert caught.value.code == X_TASKS_UNAVAILABLE and "ultimate-jobs[tasks]" in caught.value.fix


def test_a_task_whose_worker_died_is_rescued_not_left_running() -> None:
    result = tasks.flaky.enqueue(0, "rescued")  # a 3-attempt policy: the lapsed attempt is retried
    store = store_for(None)
    store.job_claim(queue="default", names=["django_tasks"], limit=1, worker_id="w-died", visibility=30, now=None)
    result.refresh()
    assert (result.status, result.worker_ids) == (TaskResultStatus.RUNNING, ["w-died"])
    Job.objects.filter(id=result.id).update(visible_at=timezone.now() - timedelta(minutes=1))  # the lease lapsed
    store.job_rescue(now=None, names=["django_tasks"], no_dead_letter=[])
    result.refresh()
    assert result.status == TaskResultStatus.READY
    assert [e.exception_class_path for e in result.errors] == ["ultimate_jobs.errors.JobsError"]
    assert "w-died" in result.errors[0].traceback
    drain(worker_id="w-alive")
    result.refresh()
    assert (result.status, result.worker_ids) == (TaskResultStatus.SUCCESSFUL, ["w-died", "w-alive"])


def test_an_operator_cancels_a_waiting_task_and_it_reads_failed() -> None:
    result = tasks.record.using(run_after=timezone.now() + timedelta(hours=1)).enqueue("never")
    ops.cancel_job(result.id, reason="customer left")
    result.refresh()
    assert result.status == TaskResultStatus.FAILED and result.is_finished
    drain()
    assert tasks.CALLS == []


def test_metrics_count_django_tasks_and_the_doctor_finds_a_stuck_one() -> None:
    from ultimate_jobs.ops.metrics import render

    done = tasks.record.enqueue("counted")
    drain()
    text = render()[0].decode()
    assert 'jobs_total{outcome="done",queue="default"} 1.0' in text.splitlines(), text
    stuck = tasks.record.enqueue("stuck")
    store_for(None).job_claim(queue="default", names=["django_tasks"], limit=1, worker_id="w-gone", visibility=30,
                              now=None)
    Job.objects.filter(id=stuck.id).update(visible_at=timezone.now() - timedelta(minutes=1))
    check = next(c for c in ops.doctor()["checks"] if c["name"] == "stuck-running")
    assert check["ids"] == [str(stuck.id)] and str(done.id) not in check["ids"]
