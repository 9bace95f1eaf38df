"""Bulk destructive CLI writes ask first, and every ops write records who made it.

Without ``--yes`` a bulk ``rm``/``retry``/``promote`` prints the count of the jobs the test planted
and changes none of them; ``by=`` lands in the log line and in the admin's ``LogEntry``.
"""

from __future__ import annotations

import json
import logging

import pytest
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.contrib.auth.models import User

from tests.cli import cli
from tests.factories import JobFactory
from tests.scheduling import utc
from ultimate_jobs import ops
from ultimate_jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


def states() -> dict[str, str]:
    return {str(i): s for i, s in Job.objects.values_list("id", "state")}


def test_rm_state_dead_all_without_yes_prints_the_count_and_removes_nothing() -> None:
    dead = [str(JobFactory(dead=True).id) for _ in range(3)]
    done = str(JobFactory(done=True).id)
    before = states()
    code, out, err = cli("rm", "--state", "dead", "--all")
    assert code == 4 and out == ""
    assert "rm would touch 3 job(s)" in err and "--yes" in err
    assert states() == before
    code, out, _ = cli("--json", "rm", "--state", "dead", "--all")
    assert code == 4
    assert json.loads(out) == {"confirm": {"action": "rm", "matching": 3, "would_touch": 3, "done": False}}
    assert states() == before
    code, out, _ = cli("rm", "--state", "dead", "--all", "--yes", "--json")
    assert code == 0 and json.loads(out) == {"affected": 3, "remaining": 0}
    assert states() == {done: "done"} and not set(dead) & set(states())


def test_retry_state_done_all_without_yes_retries_nothing() -> None:
    done = {str(JobFactory(done=True, idempotency_key=f"d{i}").id) for i in range(2)}
    code, _, err = cli("retry", "--state", "done", "--all")
    assert code == 4 and "retry would touch 2 job(s)" in err
    assert states() == {i: "done" for i in done}
    code, out, _ = cli("retry", "--state", "done", "--all", "--yes")
    assert code == 0 and "affected 2, remaining 0" in out
    assert states() == {i: "ready" for i in done}


def test_promote_by_filter_without_yes_promotes_nothing_and_one_id_needs_no_yes() -> None:
    delayed = [str(JobFactory(delayed=True).id) for _ in range(2)]
    code, _, err = cli("promote", "--state", "delayed")
    assert code == 4 and "promote would touch 2 job(s)" in err
    assert set(states().values()) == {"delayed"}
    code, out, _ = cli("promote", delayed[0])  # one job by id: no confirmation
    assert code == 0 and states()[delayed[0]] == "ready"


def test_the_cli_logs_who_acted(caplog) -> None:
    dead = JobFactory(dead=True)
    with caplog.at_level(logging.INFO, logger="ultimate_jobs"):
        assert cli("--by", "alice@ops", "retry", str(dead.id))[0] == 0
        assert cli("cancel", str(dead.id), "--reason", "wrong order")[0] == 0
    retried = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("jobs.ops.retried"))
    assert f"job_id={dead.id}" in retried and "by=alice@ops" in retried
    cancelled = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("jobs.ops.cancelled"))
    assert "by=cli:" in cancelled  # no --by: the OS user
    assert Job.objects.get(id=dead.id).last_error.startswith("cancelled by cli:")


def test_every_ops_write_by_a_user_is_in_the_admin_history(frozen_at, declare_task) -> None:
    from tests.app import jobs

    frozen_at(utc(2026, 6, 1, 10, 0, 30))
    alice = User.objects.create_user("alice", is_staff=True)
    dead, live, delayed, gone = (JobFactory(dead=True), JobFactory(), JobFactory(delayed=True),
                                 JobFactory(dead=True, queue="bulk"))
    bulk_dead = [JobFactory(dead=True, queue="old") for _ in range(2)]
    ops.retry_job(dead.id, by=alice)
    ops.cancel_job(live.id, reason="duplicate", by=alice)
    ops.promote_job(delayed.id, by=alice)
    ops.remove_job(gone.id, by=alice)
    assert ops.remove_many(state="dead", queue="old", by=alice) == {"affected": 2, "remaining": 0}
    ops.pause_queue("payments", by=alice)
    ops.resume_queue("payments", by=alice)
    tick = declare_task(name="t.audited", cron="* * * * *", tz="UTC", job=jobs.noop, input={"key": "a"})
    ops.pause_task(tick, by=alice)
    ops.resume_task(tick, by=alice)
    entries = {(e.object_id, e.change_message.split(" through")[0], e.action_flag)
               for e in LogEntry.objects.filter(user=alice)}
    assert entries == {
        (str(dead.id), "Retried", CHANGE), (str(live.id), "Cancelled", CHANGE),
        (str(delayed.id), "Promoted (run now)", CHANGE), (str(gone.id), "Removed", DELETION),
        *((str(j.id), "Removed (bulk)", DELETION) for j in bulk_dead),
        ("payments", "Paused", CHANGE), ("payments", "Resumed", CHANGE),
        ("t.audited", "Paused", CHANGE), ("t.audited", "Resumed", CHANGE),
    }
    assert Job.objects.get(id=live.id).last_error == "cancelled by alice: duplicate"
    assert ops.paused_queues() == []
    ops.pause_queue("payments", by=alice)
    assert ops.paused_queues()[0]["paused_by"] == "alice"


def test_by_none_writes_no_history_and_old_calls_still_work() -> None:
    dead = JobFactory(dead=True)
    ops.retry_job(dead.id)  # the pre-by= signature, positional id only
    assert ops.requeue_many(state="dead") == {"affected": 0, "remaining": 0}
    assert not LogEntry.objects.exists()
