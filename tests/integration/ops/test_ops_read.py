"""ops.get_job and ops.list_jobs: the shapes the admin, CLI and tests read."""

from __future__ import annotations

import json

import pytest

from tests.app import jobs
from tests.factories import JobFactory
from ultimate_jobs import JobsError, ops
from ultimate_jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


def test_get_job_answers_the_documented_shape_as_json(make_worker) -> None:
    r = jobs.flaky.enqueue(key="shape", failures=1)
    make_worker(queues=["default"], burst=True).run(install_signals=False)
    job = ops.get_job(str(r.id))
    for key in ("id", "run_id", "name", "queue", "state", "attempt", "max_attempts", "tenant_id", "enqueued_by",
                "payload", "result", "last_error", "error_code", "stop_reason", "run_at", "next_retry_at",
                "created_at", "started_at", "finished_at", "progress", "concurrency_key", "steps", "backfill"):
        assert key in job, key
    assert job["id"] == str(r.id) and job["run_id"] == str(r.run_id)
    assert job["created_at"].endswith("Z") and "T" in job["created_at"]
    assert json.loads(json.dumps(job)) == job


def test_get_job_refuses_unknown_and_malformed_ids() -> None:
    with pytest.raises(JobsError) as err:
        ops.get_job("01234567-89ab-7def-8123-456789abcdef")
    assert err.value.code == "X_JOB_NOT_FOUND"
    with pytest.raises(JobsError) as err:
        ops.get_job("nope")
    assert err.value.code == "X_ID_INVALID"


def test_list_jobs_pages_newest_first_stable_across_inserts() -> None:
    ids = [str(jobs.noop.enqueue(key=f"page{i}").id) for i in range(7)]
    newest_first = list(reversed(ids))
    first = ops.list_jobs(limit=3)
    assert [j["id"] for j in first["jobs"]] == newest_first[:3]
    assert first["previous"] is None and first["next"] == newest_first[2]
    jobs.noop.enqueue(key="inserted-meanwhile")
    second = ops.list_jobs(limit=3, after=first["next"])
    assert [j["id"] for j in second["jobs"]] == newest_first[3:6]
    third = ops.list_jobs(limit=3, after=second["next"])
    assert [j["id"] for j in third["jobs"]] == newest_first[6:]
    assert third["next"] is None
    back = ops.list_jobs(limit=3, before=second["previous"])
    assert [j["id"] for j in back["jobs"]] == newest_first[:3]


def test_list_jobs_filters() -> None:
    a = jobs.noop.enqueue(key="fa")
    jobs.other_queue.enqueue(key="fb")
    jobs.tenant_noop.enqueue(key="fc", org="acme")
    assert [j["id"] for j in ops.list_jobs(queue="other")["jobs"]] != []
    assert {j["queue"] for j in ops.list_jobs(queue="other")["jobs"]} == {"other"}
    assert [j["tenant_id"] for j in ops.list_jobs(tenant_id="acme")["jobs"]] == ["acme"]
    assert [j["id"] for j in ops.list_jobs(id_prefix=str(a.id)[:23])["jobs"]][-1] == str(a.id)
    assert [j["id"] for j in ops.list_jobs(id_prefix=str(a.id))["jobs"]] == [str(a.id)]
    assert {j["name"] for j in ops.list_jobs(name="tests.noop", state="ready")["jobs"]} == {"tests.noop"}


@pytest.mark.parametrize("kwargs", [{"limit": 201}, {"limit": 0}, {"state": "zombie"},
                                    {"after": "x", "before": "y"}])
def test_list_jobs_refuses_bad_arguments(kwargs: dict) -> None:
    with pytest.raises(JobsError):
        ops.list_jobs(**kwargs)


def test_redaction_masks_secret_keys_at_any_depth(declare) -> None:
    from ultimate_jobs import NO_TENANT

    @declare(idempotency_key="{ref}", tenant=NO_TENANT)
    def login(ctx, *, ref: str, creds: dict) -> None: ...

    @declare(idempotency_key="{ref}", tenant=NO_TENANT, sensitive=True)
    def secretive(ctx, *, ref: str) -> None: ...

    r = login.enqueue(ref="r", creds={"user": "ann", "password": "hunter2",
                                      "headers": [{"Authorization": "Bearer abc"}], "nested": {"api_key": "k"}})
    s = secretive.enqueue(ref="s")
    payload = ops.get_job(r.id)["payload"]
    assert payload["creds"]["user"] == "ann"
    assert "hunter2" not in json.dumps(payload) and "Bearer abc" not in json.dumps(payload)
    assert payload["creds"]["nested"]["api_key"] == "[redacted]"
    assert ops.get_job(s.id)["payload"] == "[redacted]"


def test_a_done_job_answers_no_current_error_and_keeps_its_earlier_failures_in_attempts(make_worker) -> None:
    r = jobs.flaky.enqueue(key="second-time-lucky", failures=1)
    make_worker(queues=["default"], burst=True).run(install_signals=False)
    job = ops.get_job(str(r.id))
    assert (job["state"], job["last_error"], job["error_code"]) == ("done", None, None)
    assert [(a["outcome"], a["error_code"]) for a in job["attempts"]] == [("retried", "X_JOB_FAILED"),
                                                                           ("done", None)]
    assert "flaky failure 1 of 1" in job["attempts"][0]["error"]
    # The settle clears them on the row itself, so every reader (the ORM, the admin's filters) agrees.
    assert Job.objects.filter(id=r.id).values_list("last_error", "error_code").get() == (None, None)
    (listed,) = ops.list_jobs(name="tests.flaky")["jobs"]
    assert (listed["last_error"], listed["error_code"]) == (None, None)


def test_a_done_row_settled_with_an_old_error_reads_none() -> None:
    # A row settled done before the settle cleared the error still reads as no current failure.
    planted = JobFactory(state="done", attempt=2, last_error="RuntimeError: long ago", error_code="X_OLD_FAILURE")
    job = ops.get_job(str(planted.id))
    assert (job["last_error"], job["error_code"]) == (None, None)
    (listed,) = ops.list_jobs(state="done")["jobs"]
    assert (listed["id"], listed["last_error"], listed["error_code"]) == (str(planted.id), None, None)


def test_attempt_timestamps_read_like_every_other_timestamp(make_worker) -> None:
    r = jobs.flaky.enqueue(key="one-format", failures=1)
    make_worker(queues=["default"], burst=True).run(install_signals=False)
    job = ops.get_job(str(r.id))
    stamps = [a[key] for a in job["attempts"] for key in ("started_at", "finished_at")]
    assert len(stamps) == 4 and all(s.endswith("Z") and "+00:00" not in s for s in stamps), stamps
    assert job["attempts"][-1]["finished_at"] == job["finished_at"]  # one instant, one spelling
