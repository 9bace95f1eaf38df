"""A real worker whose database connections are cut (a PostgreSQL restart or failover, an idle
timeout in PgBouncer or a firewall) keeps working, and the cut costs no job an attempt."""

from __future__ import annotations

import time

import pytest
from django.db import connection

from tests.app.jobs import record, record_once
from tests.app.models import Effect
from tests.process.conftest import Start, log_text, wait_until
from ultimate_jobs import ops
from ultimate_jobs.models import Job

pytestmark = [pytest.mark.process, pytest.mark.postgres_only]


def terminate_other_backends() -> int:
    """Cut every other connection to the test database, as a server restart would."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                       "WHERE datname = current_database() AND pid <> pg_backend_pid()")
        return cursor.fetchone()[0]


def test_the_worker_keeps_claiming_after_its_connections_were_cut(
        started_worker: Start) -> None:
    worker = started_worker("--concurrency", "2")
    warm = record.enqueue_many([{"key": f"warm-{n}"} for n in range(8)])
    wait_until(lambda: Job.objects.filter(state="done").count() == len(warm), timeout=20, procs=(worker,),
               what="warm-up jobs done")

    assert terminate_other_backends() >= 2  # at least the claim loop's and the listener's connections

    after = record.enqueue_many([{"key": f"after-{n}"} for n in range(4)])
    wait_until(lambda: Job.objects.filter(id__in=[r.id for r in after], state="done").count() == len(after),
               timeout=30, procs=(worker,), what="jobs enqueued after the cut done")
    assert Effect.objects.filter(key__startswith="after-").count() == len(after)
    assert worker.proc.poll() is None


def test_a_connection_cut_while_idle_costs_no_job_an_attempt(started_worker: Start) -> None:
    worker = started_worker("--concurrency", "2")
    # Both pool threads run a body, so each holds a Django connection of its own.
    warm = record.enqueue_many([{"key": f"warm-{n}", "sleep": 0.2} for n in range(4)])
    wait_until(lambda: Job.objects.filter(state="done").count() == len(warm), timeout=20, procs=(worker,),
               what="warm-up jobs done")
    assert len(set(Effect.objects.values_list("pid", flat=True))) == 1

    time.sleep(2.0)  # the scenario: the worker idles (overnight, in production) ...
    assert terminate_other_backends() >= 2  # ... and its idle connections are cut meanwhile

    after = record_once.enqueue_many([{"key": f"after-{n}"} for n in range(4)])
    ids = [r.id for r in after]
    wait_until(lambda: Job.objects.filter(id__in=ids, state__in=("done", "dead")).count() == len(ids),
               timeout=30, procs=(worker,), what="single-attempt jobs enqueued after the cut settled")
    jobs = [ops.get_job(job_id) for job_id in ids]
    # What a user sees with the bug: jobs dead-lettered with "terminating connection due to administrator
    # command" (or "the connection is closed") though the database was back before they were enqueued.
    assert [(j["state"], j["attempt"], j["error_code"]) for j in jobs] == [("done", 1, None)] * len(ids), (
        [j["last_error"] for j in jobs if j["last_error"]][:1], log_text(worker))
    assert Effect.objects.filter(key__startswith="after-").count() == len(ids)
