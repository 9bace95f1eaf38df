"""The console an on-call engineer opens (the job page, the overview) and the admin's trust rules: no
probing of redacted values through URL lookups, a confirmation before every destructive action and a
record of who acted, the admin scoped to a tenant. Every assertion is on a job, secret, tenant or
count the test itself planted."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.conf import settings
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.contrib.auth.models import Permission, User
from django.test import Client, override_settings
from django.urls import reverse

from tests.factories import JobFactory, JobStepFactory
from ultimate_jobs import NO_TENANT, JobsError, Retry, ops
from ultimate_jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)
CHANGELIST = "/admin/ultimate_jobs/job/"
LANDING = "/admin/ultimate_jobs/"


def page(job_id: object) -> str:
    return reverse("admin:ultimate_jobs_job_change", args=[str(job_id)])


def do(job_id: object, action: str) -> str:
    return reverse("admin:ultimate_jobs_job_action", args=[str(job_id), action])


# -- no probing of redacted values through URL lookups -------------------------------------------------


@pytest.mark.parametrize(("right", "wrong"), [
    ({"payload__password__startswith": "h"}, {"payload__password__startswith": "x"}),
    ({"payload__password": "hunter2"}, {"payload__password": "hunter3"}),
    ({"result__api_key__startswith": "sk_live"}, {"result__api_key__startswith": "pk_"}),
    ({"last_error__contains": "tok_secret"}, {"last_error__contains": "nothing-like-it"}),
    ({"payload__card__token__regex": "^tok"}, {"payload__card__token__regex": "^zz"}),
])
def test_a_view_only_user_cannot_recover_a_redacted_secret_by_guessing(viewer_client, right, wrong) -> None:
    planted = JobFactory(dead=True, payload={"password": "hunter2", "card": {"token": "tok_card"}},
                         result={"api_key": "sk_live_9"}, last_error="ConnectionError token=tok_secret")
    hit, miss = viewer_client.get(CHANGELIST, right), viewer_client.get(CHANGELIST, wrong)
    # Refused both ways, identically: the answer says nothing about the guess.
    assert hit.status_code == miss.status_code == 400
    assert ops.short_form(str(planted.id)) not in hit.content.decode()
    # The changelist's own filters still work.
    listing = viewer_client.get(CHANGELIST, {"state__exact": "dead", "tenant_id": planted.tenant_id or ""})
    assert listing.status_code == 200
    assert "hunter2" not in listing.content.decode() and "tok_secret" not in listing.content.decode()


# -- confirmation first, and who did it --------------------------------------------------------------


def test_bulk_actions_confirm_first_and_record_who_acted(admin_client_) -> None:
    dead = [JobFactory(dead=True, queue="payments") for _ in range(3)]
    ids = [str(j.id) for j in dead]
    confirm = admin_client_.post(CHANGELIST, {"action": "delete_jobs", "_selected_action": ids})
    html = confirm.content.decode()
    assert confirm.status_code == 200 and 'id="uj-confirm-yes"' in html
    assert all(ops.short_form(i) in html for i in ids) and "cannot be undone" in html
    assert Job.objects.filter(id__in=ids).count() == 3  # nothing happened yet
    assert LogEntry.objects.count() == 0
    admin_client_.post(CHANGELIST, {"action": "delete_jobs", "_selected_action": ids[:2], "confirmed": "yes"})
    assert set(Job.objects.values_list("id", flat=True)) == {dead[2].id}
    entries = LogEntry.objects.filter(object_id__in=ids[:2])
    assert entries.count() == 2
    assert {(e.user.username, e.action_flag) for e in entries} == {("root", DELETION)}
    admin_client_.post(CHANGELIST, {"action": "retry_jobs", "_selected_action": [ids[2]], "confirmed": "yes"})
    retried = LogEntry.objects.get(object_id=ids[2])
    assert (retried.user.username, retried.action_flag) == ("root", CHANGE)
    assert "Retried" in retried.get_change_message()
    paused = reverse("admin:ultimate_jobs_queue_toggle", args=["payments", "pause"])
    admin_client_.post(paused)
    assert ops.paused_queues()[0]["paused_by"] == "root"
    assert Job.objects.get(id=dead[2].id).state == "ready"


def test_the_job_page_buttons_confirm_and_retry_from_a_chosen_step(admin_client_) -> None:
    dead = JobFactory(dead=True)
    for seq, name in enumerate(("load", "charge", "notify")):
        JobStepFactory(run_id=dead.run_id, name=name, seq=seq, status="failed" if name == "charge" else "completed")
    for action in ("delete", "retry", "retry-from-failed-step"):
        shown = admin_client_.get(do(dead.id, action))
        assert shown.status_code == 200 and 'id="uj-confirm-yes"' in shown.content.decode()
    assert Job.objects.get(id=dead.id).state == "dead"  # a GET never acts
    chooser = admin_client_.get(do(dead.id, "retry-from-failed-step")).content.decode()
    assert '<option value="charge" selected>' in chooser
    admin_client_.post(do(dead.id, "retry-from-failed-step"), {"confirmed": "yes", "step": "notify"})
    assert [s["name"] for s in ops.get_job(dead.id)["steps"]] == ["load", "charge"]
    assert LogEntry.objects.get(object_id=str(dead.id)).user.username == "root"
    # Django's own delete URL leads to the same confirmation, never an ORM delete.
    assert admin_client_.get(f"{CHANGELIST}{dead.id}/delete/", follow=True).status_code == 200
    assert Job.objects.filter(id=dead.id).exists()


# -- the job page: attempts as a timeline, no stale error, earlier runs of the key ---------------------


def test_a_done_job_after_failed_attempts_shows_them_in_its_timeline_not_as_a_current_error(admin_client_) -> None:
    attempts = [
        {"attempt": 1, "worker": "w-one", "started_at": "2026-12-01T10:00:00Z",
         "finished_at": "2026-12-01T10:00:02.5Z", "outcome": "retried", "error_code": "X_JOB_FAILED",
         "error": "Traceback (most recent call last):\nConnectionError: gateway timeout (api_key=sk_live_1)"},
        {"attempt": 2, "worker": "w-two", "started_at": "2026-12-01T10:01:00Z",
         "finished_at": "2026-12-01T10:01:01Z", "outcome": "done", "error_code": None, "error": None},
    ]
    done = JobFactory(done=True, attempt=2, error_code="X_JOB_FAILED", attempts=attempts,
                      last_error="ConnectionError: gateway timeout", result=None)
    html = admin_client_.get(page(done.id)).content.decode()
    assert 'id="job-error"' not in html  # no "Error" section as if it were current
    assert re.search(r'id="job-error-code">–<', html)
    timeline = html[html.index('id="job-timeline"'):html.index("</table>", html.index('id="job-timeline"'))]
    assert timeline.count('class="uj-attempt"') == 2
    for text in ("w-one", "w-two", "retried", "2.50 s", "gateway timeout", "X_JOB_FAILED"):
        assert text in timeline, text
    assert "sk_live_1" not in html
    assert '<p id="job-result">–</p>' in html and "None." not in html  # no result: a dash, never "None."


def test_old_rows_without_attempt_history_and_malformed_entries_still_render(admin_client_) -> None:
    old = JobFactory(done=True, attempt=3, last_error="RuntimeError: flaky the first time", attempts=[])
    html = admin_client_.get(page(old.id)).content.decode()
    assert 'id="job-no-timeline"' in html and 'id="job-error"' not in html
    # A done job has no current failure (SPEC §10), even a row settled before the settle cleared it.
    assert 'id="job-earlier-error"' not in html and "RuntimeError: flaky the first time" not in html
    retrying = JobFactory(state="ready", attempt=1, last_error="RuntimeError: flaky the first time", attempts=[])
    html = admin_client_.get(page(retrying.id)).content.decode()
    assert 'id="job-earlier-error"' in html and "RuntimeError: flaky the first time" in html
    odd = JobFactory(dead=True, attempts=[1, "x", None, {"outcome": "failed", "started_at": "not a time"}])
    html = admin_client_.get(page(odd.id)).content.decode()
    assert html.count('class="uj-attempt"') == 1 and 'id="job-error"' in html


def test_an_error_stored_already_redacted_is_not_redacted_again(admin_client_) -> None:
    stored = JobFactory(dead=True, last_error='ConnectionError: unreachable (api_key=[redacted]) {"token": [redacted]}')
    for url in (page(stored.id), CHANGELIST):
        html = admin_client_.get(url).content.decode()
        assert "api_key=[redacted])" in html and "[redacted]]" not in html, url


def test_breadcrumbs_name_the_page_and_times_are_utc_with_the_instant_on_hover(admin_client_) -> None:
    job = JobFactory(dead=True, name="billing.charge")
    html = admin_client_.get(page(job.id)).content.decode()
    crumbs = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html[html.index('class="breadcrumbs"'):].split("</div>")[0]))
    assert "All jobs &rsaquo; billing.charge · dead" in crumbs and "Jobs &rsaquo; Jobs" not in crumbs
    finished = job.finished_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    assert f'title="{finished}"' in html
    listing = admin_client_.get(CHANGELIST).content.decode()
    assert f'title="{job.id}">{ops.short_form(str(job.id))}</code>' in listing  # short id, the whole one on hover
    assert f"{CHANGELIST}{job.id}/change/" in listing  # and in the link


def test_the_date_drill_down_walks_utc_days_whatever_time_zone(admin_client_) -> None:
    from datetime import UTC, datetime

    late = JobFactory(dead=True, created_at=datetime(2026, 11, 30, 23, 30, tzinfo=UTC))  # Dec 1 in Berlin
    with override_settings(TIME_ZONE="Europe/Berlin"):
        nov30 = admin_client_.get(CHANGELIST, {"created_at__year": "2026", "created_at__month": "11",
                                               "created_at__day": "30"})
        assert [j.id for j in nov30.context["cl"].result_list] == [late.id]


def test_the_job_page_links_the_same_keys_earlier_runs(admin_client_) -> None:
    first = JobFactory(dead=True, name="billing.charge", idempotency_key="charge:7", tenant_id="acme")
    again = JobFactory(done=True, name="billing.charge", idempotency_key="charge:7", tenant_id="acme")
    other = JobFactory(done=True, name="billing.charge", idempotency_key="charge:8", tenant_id="acme")
    html = admin_client_.get(page(again.id)).content.decode()
    runs = html[html.index('id="job-earlier-runs"'):].split("</ul>")[0]
    assert page(first.id) in runs and page(other.id) not in runs


# -- the admin scoped to a tenant ------------------------------------------------------------------------


def tenant_of_request(request: Any) -> str | None:
    """The ADMIN_TENANT_OF hook the tests name: support staff see their shop only."""
    return {"acme-support": "acme"}.get(request.user.get_username())


@pytest.fixture
def acme_client(transactional_db: None) -> Client:
    user = User.objects.create_user("acme-support", password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="ultimate_jobs",
                                                         codename__in=("view_job", "retry_job", "delete_job")))
    client = Client()
    client.force_login(user)
    return client


def test_a_tenant_scoped_admin_sees_and_touches_only_its_tenant(acme_client, admin_client_) -> None:
    ours = JobFactory(dead=True, tenant_id="acme", name="shop.sync")
    theirs = JobFactory(dead=True, tenant_id="globex", name="shop.sync")
    scoped = {**settings.ULTIMATE_JOBS, "ADMIN_TENANT_OF": f"{__name__}.tenant_of_request"}
    with override_settings(ULTIMATE_JOBS=scoped):
        listing = acme_client.get(CHANGELIST)
        assert [j.id for j in listing.context["cl"].result_list] == [ours.id]
        assert [j.id for j in acme_client.get(CHANGELIST, {"tenant_id": "globex"}).context["cl"].result_list] == []
        assert acme_client.get(page(theirs.id)).status_code == 302
        acme_client.post(do(theirs.id, "retry"), {"confirmed": "yes"})
        acme_client.post(CHANGELIST, {"action": "delete_jobs", "_selected_action": [str(theirs.id)],
                                      "confirmed": "yes"})
        assert Job.objects.get(id=theirs.id).state == "dead"
        for fleet in ("queues", "workers", "tasks", "backfills"):
            assert acme_client.get(reverse(f"admin:ultimate_jobs_{fleet}")).status_code == 403
        landing = acme_client.get(LANDING).content.decode()
        assert page(ours.id) in landing and page(theirs.id) not in landing and 'id="uj-scoped"' in landing
        # The superuser the hook answers None for sees every tenant.
        everyone = admin_client_.get(CHANGELIST).context["cl"].result_list
        assert {j.id for j in everyone} == {ours.id, theirs.id}


def test_a_broken_tenant_hook_fails_closed(viewer_client) -> None:
    JobFactory(dead=True, tenant_id="globex")
    for broken in (f"{__name__}.no_such_callable", f"{__name__}.tenant_of_request_answering_a_number"):
        with override_settings(ULTIMATE_JOBS={**settings.ULTIMATE_JOBS, "ADMIN_TENANT_OF": broken}):
            with pytest.raises(JobsError) as refused:
                viewer_client.get(CHANGELIST)  # an error, never every tenant's jobs
            assert refused.value.code == "X_CONFIG_INVALID" and "ADMIN_TENANT_OF" in refused.value.cause


def tenant_of_request_answering_a_number(request: Any) -> object:
    return 42


# -- the overview: what each queue ran, what waits, what died ---------------------------------------------


def _points(html: str, queue: str, window: str, kind: str) -> int:
    card = html[html.index(f'id="uj-queue-{queue}"'):]
    card = card[:card.index("</section>")]
    chart = card[card.index(f"uj-figure uj-{window}"):]
    chart = chart[:chart.index("</svg>")]
    return sum(int(n) for n in re.findall(rf'data-kind="{kind}" data-count="(\d+)"', chart))


def test_the_overview_charts_the_jobs_this_test_ran(admin_client_, declare, make_worker) -> None:
    @declare(name="console.ok", queue="console", idempotency_key="ok:{n}", tenant=NO_TENANT)
    def ok(ctx: Any, *, n: int) -> None: ...

    @declare(name="console.broken", queue="console", idempotency_key="broken:{n}", tenant=NO_TENANT,
             retry=Retry(attempts=1))
    def broken(ctx: Any, *, n: int) -> None:
        raise RuntimeError(f"broken {n}")

    for n in range(5):
        ok.enqueue(n=n)
    for n in range(2):
        broken.enqueue(n=n)
    make_worker(queues=["console"], burst=True).run(install_signals=False)
    waiting = [ok.enqueue(n=100 + n) for n in range(3)]
    html = admin_client_.get(LANDING).content.decode()
    for window in ("hour", "day"):
        assert _points(html, "console", window, "done") == 5
        assert _points(html, "console", window, "failed") == 2
    card = html[html.index('id="uj-queue-console"'):].split("</section>")[0]
    assert re.search(r'class="uj-depth">3<', card)
    dead = html[html.index('id="uj-dead"'):]
    assert sum(1 for j in Job.objects.filter(name="console.broken") if page(j.id) in dead) == 2
    assert "broken 1" in dead or "broken 0" in dead
    # The live refresh's fragment carries the same numbers.
    fragment = admin_client_.get(reverse("admin:ultimate_jobs_overview"), {"partial": "1"}).content.decode()
    assert fragment.lstrip().startswith('<div id="uj-overview"') and _points(fragment, "console", "hour", "done") == 5
    assert len(waiting) == 3


def test_the_workers_page_shows_a_killed_worker_as_presumed_dead(admin_client_) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from ultimate_jobs.models import WorkerHeartbeat

    now = timezone.now()
    for worker_id, beat in (("w-alive", now), ("w-killed", now - timedelta(minutes=5))):
        WorkerHeartbeat.objects.create(id=worker_id, host="h", pid=1, queues=["default"], slots=2, in_flight=[],
                                       started_at=beat, last_heartbeat_at=beat,
                                       expires_at=beat + timedelta(seconds=30))
    html = admin_client_.get(reverse("admin:ultimate_jobs_workers")).content.decode()
    rows = {m.group(1): m.group(2) for m in re.finditer(r'<tr class="uj-worker-([a-z-]+)"><td>([^<]+)</td>', html)}
    assert rows == {"alive": "w-alive", "presumed-dead": "w-killed"}
    assert "presumed dead</span>" in html
