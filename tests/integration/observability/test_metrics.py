"""The metrics view: guarded, and its output, parsed by prometheus-client, shows the series."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from tests.app import jobs
from tests.factories import JobFactory
from ultimate_jobs import ops

pytestmark = pytest.mark.django_db(transaction=True)
URL = "/jobs/metrics"
TOKEN = "planted-metrics-token-0123456789"  # 32 characters: over the 24 the setting requires


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_the_documented_series_parse(settings, frozen_clock, make_worker) -> None:
    from datetime import timedelta

    settings.ULTIMATE_JOBS = {**settings.ULTIMATE_JOBS, "METRICS_TOKEN": TOKEN}
    jobs.noop.enqueue(key="m1")
    jobs.always_fails.enqueue(key="m2")
    make_worker(queues=["default"], burst=True).run(install_signals=False)
    JobFactory(queue="payments", run_at=frozen_clock.now() - timedelta(minutes=6))
    JobFactory(queue="payments", running=True)  # holds a worker's slot: demand, not depth
    ops.pause_queue("payments")
    worker = make_worker(queues=["default"], concurrency=4, worker_id="w-metrics")
    worker.presence.beat([])
    response = Client().get(URL, HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    got = samples(response.content.decode())
    assert got[("queue_depth", (("queue", "payments"),))] == 1
    assert got[("queue_demand", (("queue", "payments"),))] == 2  # the ready one and the running one
    assert got[("queue_demand", (("queue", "default"),))] == 0
    assert got[("queue_oldest_ready_seconds", (("queue", "payments"),))] == 360.0
    assert got[("queue_dead_jobs", (("queue", "default"),))] == 1
    assert got[("queue_jobs", (("queue", "default"), ("state", "done")))] == 1
    assert got[("queue_paused", (("queue", "payments"),))] == 1
    assert got[("jobs_total", (("outcome", "done"), ("queue", "default")))] == 1
    assert got[("jobs_total", (("outcome", "dead"), ("queue", "default")))] == 1
    assert got[("jobs_total", (("outcome", "retried"), ("queue", "default")))] == 2
    assert got[("job_leases_lost_total", (("queue", "default"),))] == 0
    assert got[("worker_capacity", (("worker", "w-metrics"),))] == 4
    assert got[("worker_in_flight", (("worker", "w-metrics"),))] == 0
    assert got[("workers_live", ())] == 1


def test_the_view_is_guarded(settings) -> None:
    settings.ULTIMATE_JOBS = {**settings.ULTIMATE_JOBS, "METRICS_TOKEN": TOKEN}
    assert Client().get(URL).status_code == 401
    assert Client().get(URL, HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    client = Client()
    user = User.objects.create_user("nobody", password="pw", is_staff=True)
    client.force_login(user)
    assert client.get(URL).status_code == 403
    user.user_permissions.add(Permission.objects.get(codename="view_job"))
    client.force_login(User.objects.get(pk=user.pk))
    assert client.get(URL).status_code == 200
    assert Client().post(URL, HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 405


@pytest.mark.parametrize("short", ["x", "s3cret", "a" * 23])
def test_a_short_metrics_token_is_refused_at_startup_and_never_accepted(settings, short: str) -> None:
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError

    from ultimate_jobs.conf import JobsSettings
    from ultimate_jobs.errors import JobsError

    with pytest.raises(JobsError) as refused:
        JobsSettings.from_dict({"METRICS_TOKEN": short})
    assert refused.value.code == "X_CONFIG_INVALID" and f"is {len(short)} character(s)" in refused.value.cause
    settings.ULTIMATE_JOBS = {**settings.ULTIMATE_JOBS, "METRICS_TOKEN": short}
    with pytest.raises(SystemCheckError, match="METRICS_TOKEN"):
        call_command("check", "--database", "default")
    response = Client(raise_request_exception=False).get(URL, HTTP_AUTHORIZATION=f"Bearer {short}")
    assert response.status_code != 200 and b"jobs_total" not in response.content
    assert JobsSettings.from_dict({"METRICS_TOKEN": "a" * 24}).METRICS_TOKEN == "a" * 24
