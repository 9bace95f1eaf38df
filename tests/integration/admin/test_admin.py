"""The admin as the dead-letter console: changelist, actions, the job page, permissions."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.app import jobs
from tests.factories import JobFactory, JobStepFactory
from ultimate_jobs import ops
from ultimate_jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)
CHANGELIST = "/admin/ultimate_jobs/job/"
ACTIONS = ("retry_jobs", "retry_from_failed_step", "cancel_jobs", "run_jobs_now", "delete_jobs")


def page(job_id: object) -> str:
    return f"{CHANGELIST}{job_id}/change/"


def do(job_id: object, action: str) -> str:
    return reverse("admin:ultimate_jobs_job_action", args=[str(job_id), action])


def test_a_dead_job_retried_from_the_admin_runs_again(admin_client_, make_worker) -> None:
    r = jobs.flaky.enqueue(key="admin", failures=3)
    Job.objects.filter(id=r.id).update(state="dead", attempt=5, stop_reason="attempts-exhausted")
    listing = admin_client_.get(CHANGELIST, {"state__exact": "dead"})
    assert listing.status_code == 200 and str(r.id) in listing.content.decode()
    response = admin_client_.post(CHANGELIST, {"action": "retry_jobs", "_selected_action": [str(r.id)],
                                               "confirmed": "yes"}, follow=True)
    assert "1 job(s) retried." in response.content.decode()
    make_worker(queues=["default"], burst=True).run(install_signals=False)
    job = ops.get_job(r.id)
    assert (job["state"], job["attempt"]) == ("done", 4)  # a fresh budget: three failures, then success


def test_the_job_page_shows_the_timeline_and_its_buttons_act(admin_client_) -> None:
    dead = JobFactory(dead=True, last_error="RuntimeError: card declined")
    JobStepFactory(run_id=dead.run_id, name="load", status="completed", output={"rows": 3}, seq=0)
    JobStepFactory(run_id=dead.run_id, name="charge", status="failed", executions=3, error="declined", seq=1)
    html = admin_client_.get(page(dead.id)).content.decode()
    for text in ("card declined", "charge", "declined", "Retry from step (charge)", "&quot;rows&quot;: 3",
                 "3 of 3"):
        assert text in html, text
    response = admin_client_.post(do(dead.id, "retry-from-failed-step"), {"confirmed": "yes"}, follow=True)
    assert "retried from a step" in response.content.decode()
    assert [s["name"] for s in ops.get_job(dead.id)["steps"]] == ["load"]
    assert ops.get_job(dead.id)["state"] == "ready"
    # Refusals become messages, never a 500.
    response = admin_client_.post(do(dead.id, "retry"), {"confirmed": "yes"}, follow=True)
    assert response.status_code == 200 and "X_JOB_NOT_REQUEUEABLE" in response.content.decode()


def test_running_jobs_are_never_retried_or_deleted_from_the_admin(admin_client_) -> None:
    running = JobFactory(running=True)
    for action in ("retry_jobs", "delete_jobs"):
        response = admin_client_.post(CHANGELIST, {"action": action, "_selected_action": [str(running.id)],
                                                   "confirmed": "yes"}, follow=True)
        assert response.status_code == 200
        assert ("X_JOB_NOT_REQUEUEABLE" if action == "retry_jobs" else "X_JOB_NOT_REMOVABLE") in \
            response.content.decode()
    assert Job.objects.get(id=running.id).state == "running"
    # Django's own delete page is not a way around ops.
    admin_client_.post(f"{CHANGELIST}{running.id}/delete/", {"post": "yes"})
    assert Job.objects.get(id=running.id).state == "running"
    html = admin_client_.get(page(running.id)).content.decode()
    assert 'id="do-cancel"' in html and 'id="do-retry"' not in html and 'id="do-delete"' not in html
    admin_client_.post(do(running.id, "cancel"), {"confirmed": "yes"})
    assert Job.objects.get(id=running.id).state == "cancelled"


def test_bulk_actions_on_fifty_dead_jobs(admin_client_) -> None:
    Job.objects.bulk_create([JobFactory.build(dead=True, queue="payments") for _ in range(50)])
    ids = [str(i) for i in Job.objects.values_list("id", flat=True)]
    response = admin_client_.post(CHANGELIST, {"action": "retry_jobs", "_selected_action": ids, "confirmed": "yes"},
                                  follow=True)
    assert "50 job(s) retried." in response.content.decode()
    assert Job.objects.filter(state="ready").count() == 50
    admin_client_.post(CHANGELIST, {"action": "cancel_jobs", "_selected_action": ids[:10], "confirmed": "yes"})
    admin_client_.post(CHANGELIST, {"action": "delete_jobs", "_selected_action": ids[:5], "confirmed": "yes"})
    assert Job.objects.filter(state="cancelled").count() == 5 and Job.objects.count() == 45


def test_a_view_only_user_can_look_but_every_write_changes_nothing(viewer_client) -> None:
    dead, delayed, live = JobFactory(dead=True), JobFactory(delayed=True), JobFactory()
    JobStepFactory(run_id=dead.run_id, name="charge", status="failed")
    before = sorted(Job.objects.values_list("id", "state", "run_at"))
    listing = viewer_client.get(CHANGELIST)
    assert listing.status_code == 200
    html = viewer_client.get(page(dead.id)).content.decode()
    assert str(dead.id) in html and 'id="job-buttons"' not in html
    for action in ACTIONS:
        for job in (dead, delayed, live):
            response = viewer_client.post(CHANGELIST, {"action": action, "_selected_action": [str(job.id)],
                                                       "confirmed": "yes"})
            assert response.status_code in (200, 302, 403)
    for action in ("retry", "retry-from-failed-step", "cancel", "run-now", "delete"):
        for job in (dead, delayed, live):
            assert viewer_client.post(do(job.id, action), {"confirmed": "yes"}).status_code == 403
    queue_toggle = reverse("admin:ultimate_jobs_queue_toggle", args=["default", "pause"])
    assert viewer_client.post(queue_toggle).status_code == 403
    assert sorted(Job.objects.values_list("id", "state", "run_at")) == before
    assert ops.paused_queues() == []


def test_the_changelist_query_count_does_not_grow_with_rows(admin_client_) -> None:
    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert admin_client_.get(CHANGELIST).status_code == 200
        return len(queries)

    Job.objects.bulk_create([JobFactory.build(dead=True) for _ in range(3)])
    few = count()
    Job.objects.bulk_create([JobFactory.build(dead=True, name="tests.flaky") for _ in range(45)])
    assert count() == few


def test_search_by_id_prefix_and_idempotency_key(admin_client_) -> None:
    a, b = JobFactory(idempotency_key="invoice:42"), JobFactory(idempotency_key="invoice:43")
    found = admin_client_.get(CHANGELIST, {"q": "invoice:42"}).context["cl"].result_list
    assert [j.id for j in found] == [a.id]
    found = admin_client_.get(CHANGELIST, {"q": "invoice:"}).context["cl"].result_list
    assert {j.id for j in found} == {a.id, b.id}
    found = admin_client_.get(CHANGELIST, {"q": str(b.id)[:30]}).context["cl"].result_list
    assert b.id in {j.id for j in found}
    found = admin_client_.get(CHANGELIST, {"q": str(b.id)}).context["cl"].result_list
    assert [j.id for j in found] == [b.id]
    t = JobFactory(tenant_id="acme")
    assert [j.id for j in admin_client_.get(CHANGELIST, {"q": "acme"}).context["cl"].result_list] == [t.id]
    listing = admin_client_.get(CHANGELIST, {"tenant_id": "acme"})
    assert [j.id for j in listing.context["cl"].result_list] == [t.id]
    assert '<a href="?tenant_id=acme">acme</a>' in listing.content.decode()
    assert admin_client_.get(CHANGELIST, {"tenant_id": "acme", "state__exact": "ready", "queue": "default",
                                          "created_at__year": "2026"}).status_code == 200


def test_queue_worker_task_and_backfill_pages(admin_client_, make_worker) -> None:
    JobFactory(dead=True, queue="payments")
    html = admin_client_.get(reverse("admin:ultimate_jobs_queues")).content.decode()
    assert 'data-queue="payments"' in html
    admin_client_.post(reverse("admin:ultimate_jobs_queue_toggle", args=["payments", "pause"]))
    assert [p["queue"] for p in ops.paused_queues()] == ["payments"]
    assert "paused" in admin_client_.get(reverse("admin:ultimate_jobs_queues")).content.decode()
    admin_client_.post(reverse("admin:ultimate_jobs_queue_toggle", args=["payments", "resume"]))
    assert ops.paused_queues() == []
    worker = make_worker(queues=["payments"])
    worker.presence.beat([])
    assert worker.worker_id in admin_client_.get(reverse("admin:ultimate_jobs_workers")).content.decode()
    tasks = admin_client_.get(reverse("admin:ultimate_jobs_tasks")).content.decode()
    assert "No scheduler installed" not in tasks  # the scheduler always ships: no "not installed" branch


def test_the_backfill_page_shows_declared_backfills_and_links_each_pass_to_its_job(admin_client_) -> None:
    import html as html_module

    from tests.app.jobs import slug_backfill
    from tests.app.models import Post
    from ultimate_jobs.testing import run_job

    page = reverse("admin:ultimate_jobs_backfills")
    html = admin_client_.get(page).content.decode()
    assert 'data-backfill="tests.backfill.slugs" data-state="pending"' in html
    assert "No backfill has run yet." in html
    Post.objects.bulk_create([Post(title=f"p{i}") for i in range(150)])
    trace = run_job(slug_backfill)
    html = admin_client_.get(page).content.decode()
    assert 'data-backfill="tests.backfill.slugs" data-state="completed"' in html
    assert f'data-run="{trace.run_id}"' in html and "<td>150</td><td>2</td>" in html
    assert reverse("admin:ultimate_jobs_job_change", args=[trace.id]) in html
    job_page = admin_client_.get(reverse("admin:ultimate_jobs_job_change", args=[trace.id])).content.decode()
    assert f"{page}?name=tests.backfill.slugs" in job_page
    assert '"status": "completed"' in html_module.unescape(job_page)
    narrowed = admin_client_.get(page, {"name": "someone-else"}).content.decode()
    assert "data-run=" not in narrowed
