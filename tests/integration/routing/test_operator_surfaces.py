"""``ops``, the admin and the doctor follow ``QUEUE_DATABASES``: they read and write a routed
queue's jobs on its database, and list every database's jobs together."""

from __future__ import annotations

import pytest

from tests.app.jobs import noop
from tests.support.routing import ROUTED, raw
from ultimate_jobs import ops

pytestmark = [pytest.mark.postgres_only,
              pytest.mark.django_db(databases=["default", ROUTED], transaction=True)]


def _plant(routed_n: int = 3, home_n: int = 2) -> tuple[list[str], list[str]]:
    routed_ids = [str(noop.using(queue="emails").enqueue(key=f"mail-secret-{i}").id) for i in range(routed_n)]
    home_ids = [str(noop.enqueue(key=f"home-secret-{i}").id) for i in range(home_n)]
    return routed_ids, home_ids


def test_get_and_list_find_the_routed_jobs(routed) -> None:
    routed_ids, home_ids = _plant()
    assert ops.get_job(routed_ids[1])["payload"] == {"key": "mail-secret-1"}
    assert [j["id"] for j in ops.list_jobs(queue="emails")["jobs"]] == routed_ids[::-1]
    assert [j["id"] for j in ops.list_jobs(queue="default")["jobs"]] == home_ids[::-1]
    # Without a queue: both databases, newest first, and the cursors page across them.
    everything = sorted(routed_ids + home_ids, reverse=True)
    assert [j["id"] for j in ops.list_jobs()["jobs"]] == everything
    seen, page = [], ops.list_jobs(limit=2)
    while True:
        seen += [j["id"] for j in page["jobs"]]
        if page["next"] is None:
            break
        page = ops.list_jobs(limit=2, after=page["next"])
    assert seen == everything
    back = ops.list_jobs(limit=2, before=everything[-1])
    assert [j["id"] for j in back["jobs"]] == everything[-3:-1]
    assert back["next"] == everything[-2] and back["previous"] == everything[-3]


def test_cancel_and_retry_write_on_the_routed_database(routed) -> None:
    routed_ids, home_ids = _plant(routed_n=2, home_n=1)
    ops.cancel_job(routed_ids[0], reason="operator")
    assert raw(ROUTED, "SELECT state FROM ultimate_jobs_job WHERE id = %s", (routed_ids[0],)) == [("cancelled",)]
    assert raw("default", "SELECT state FROM ultimate_jobs_job") == [("ready",)]
    raw(ROUTED, "UPDATE ultimate_jobs_job SET state = 'dead', finished_at = now() WHERE id = %s", (routed_ids[1],))
    ops.retry_job(routed_ids[1])
    assert raw(ROUTED, "SELECT state FROM ultimate_jobs_job WHERE id = %s", (routed_ids[1],)) == [("ready",)]
    assert ops.requeue_many(state="cancelled", queue="emails")["affected"] == 1
    assert raw(ROUTED, "SELECT state FROM ultimate_jobs_job WHERE id = %s", (routed_ids[0],)) == [("ready",)]


def test_pausing_a_routed_queue_writes_the_pause_where_its_workers_claim(routed) -> None:
    ops.pause_queue("emails")
    assert raw(ROUTED, "SELECT queue FROM ultimate_jobs_queuepause") == [("emails",)]
    assert raw("default", "SELECT queue FROM ultimate_jobs_queuepause") == []
    assert [p["queue"] for p in ops.paused_queues()] == ["emails"]
    ops.resume_queue("emails")
    assert raw(ROUTED, "SELECT queue FROM ultimate_jobs_queuepause") == []


def test_queue_stats_count_the_routed_jobs(routed) -> None:
    _plant(routed_n=3, home_n=2)
    stats = {s["queue"]: s for s in ops.queue_stats()}
    assert (stats["emails"]["ready"], stats["emails"]["total"]) == (3, 3)
    assert (stats["default"]["ready"], stats["default"]["total"]) == (2, 2)


def test_the_doctor_checks_the_routed_database_and_names_it(routed) -> None:
    routed_ids, _ = _plant(routed_n=1, home_n=1)
    raw(ROUTED, "UPDATE ultimate_jobs_job SET state = 'running', claim = NULL, claimed_by = NULL WHERE id = %s",
        (routed_ids[0],))
    report = ops.doctor()
    checks = {c["name"]: c for c in report["checks"]}
    assert checks[f"lease-columns@{ROUTED}"]["ids"] == [routed_ids[0]]
    assert checks["lease-columns"]["ok"] and not report["ok"]


def test_the_admin_lists_a_routed_queue_and_opens_its_job(routed, admin_client) -> None:
    routed_ids, _ = _plant(routed_n=1, home_n=1)
    listing = admin_client.get("/admin/ultimate_jobs/job/", {"queue": "emails"}).content.decode()
    assert "mail-secret-0" in listing and "home-secret-0" not in listing
    page = admin_client.get(f"/admin/ultimate_jobs/job/{routed_ids[0]}/change/").content.decode()
    assert "mail-secret-0" in page


def test_counters_and_metrics_count_what_a_worker_settled_on_the_routed_database(routed, make_worker) -> None:
    for i in range(3):
        noop.using(queue="emails").enqueue(key=f"counted-{i}")
    stats = make_worker(queues=["emails"], burst=True, concurrency=2).run(install_signals=False)
    assert stats["settled"] == 3
    assert raw(ROUTED, "SELECT count(*) FROM ultimate_jobs_job WHERE state = 'done'") == [(3,)]
    totals = {(t["queue"], t["outcome"]): t["count"] for t in ops.counter_totals()}
    assert totals[("emails", "done")] == 3
    assert ops.counters(queue="emails")["totals"]["done"] == 3
    from ultimate_jobs.ops.metrics import render

    text = render()[0].decode()
    assert 'jobs_total{outcome="done",queue="emails"} 3.0' in text


def test_a_routed_job_is_found_by_its_id_prefix_and_its_page_lists_its_earlier_runs(routed, admin_client) -> None:
    first = noop.using(queue="emails").enqueue(key="rerun-secret")
    raw(ROUTED, "UPDATE ultimate_jobs_job SET state = 'done', finished_at = now() WHERE id = %s", (first.id,))
    again = noop.using(queue="emails").enqueue(key="rerun-secret")  # the key is free again: a second run
    assert again.id != first.id
    assert ops.resolve_job_id(str(again.id)[:30]) == str(again.id)
    assert str(again.id) in ops.matching_job_ids(str(again.id)[:30])
    page = admin_client.get(f"/admin/ultimate_jobs/job/{again.id}/change/").content.decode()
    assert f"/admin/ultimate_jobs/job/{first.id}/change/" in page  # the earlier run, read on its database


def test_the_overview_and_jobs_stats_include_the_routed_queue(routed, make_worker) -> None:
    import json

    from tests.cli import run_command

    _plant(routed_n=3, home_n=2)
    dead = str(noop.using(queue="emails").enqueue(key="mail-dead").id)
    raw(ROUTED, "UPDATE ultimate_jobs_job SET state = 'dead', finished_at = now(), error_code = 'X_PLANTED' "
                "WHERE id = %s", (dead,))
    for i in range(2):
        noop.using(queue="emails").enqueue(key=f"settled-{i}")
    make_worker(queues=["emails"], burst=True, concurrency=2).run(install_signals=False)  # 5 done: 3 planted + 2

    view = ops.overview()
    queues = {q["queue"]: q for q in view["queues"]}
    assert (queues["emails"]["depth"], queues["default"]["depth"]) == (0, 2)
    assert sum(queues["emails"]["hour"]["done"]) == 5
    assert [(d["id"], d["error_code"]) for d in view["dead_last_day"]] == [(dead, "X_PLANTED")]
    assert view["dead_last_day_count"] == 1

    code, out, _ = run_command("jobs", "stats", "--json")
    assert code == 0
    stats = json.loads(out)
    overview_queues = {q["queue"]: q for q in stats["overview"]["queues"]}
    assert sum(overview_queues["emails"]["hour"]["done"]) == 5
    assert {q["queue"] for q in stats["queues"]} >= {"emails", "default"}
