"""One real ``jobs_worker`` process serving queues on two databases drains both: a claim loop per
alias, each settling on its own database, and the relay role delivering a staged routed job."""

from __future__ import annotations

import signal

import pytest
from django.db import transaction

from tests.app.jobs import record
from tests.app.models import Effect
from tests.process.conftest import wait_exit, wait_started, wait_until
from tests.support.routing import PROCESS_TIMEOUT, ROUTED, raw

pytestmark = [pytest.mark.postgres_only, pytest.mark.process,
              pytest.mark.django_db(databases=["default", ROUTED], transaction=True)]

STATES = "SELECT payload->>'key', state, attempt FROM ultimate_jobs_job ORDER BY 1"


def test_a_burst_worker_drains_the_routed_and_the_default_queue_and_publishes_a_staged_routed_job(
        routed, routed_env, worker_process) -> None:
    for i in range(20):
        record.using(queue="emails").enqueue(key=f"mail-{i}")
        record.enqueue(key=f"home-{i}")
    with transaction.atomic():
        assert record.using(queue="emails").enqueue(key="mail-staged").staged
    proc = worker_process("--queues", "default,emails", "--burst", "--concurrency", "4", env=routed_env)
    code, _ = wait_exit(proc, PROCESS_TIMEOUT)
    assert code == 0, proc.output()
    expected_mail = sorted([f"mail-{i}" for i in range(20)] + ["mail-staged"])
    assert raw(ROUTED, STATES) == [(k, "done", 1) for k in expected_mail]
    assert raw("default", STATES) == sorted((f"home-{i}", "done", 1) for i in range(20))
    effects = sorted(Effect.objects.values_list("key", flat=True))
    assert effects == sorted(expected_mail + [f"home-{i}" for i in range(20)])  # each body ran once


def test_a_long_running_worker_serves_both_databases_and_sigterm_drains_both(routed, routed_env,
                                                                          worker_process) -> None:
    proc = wait_started(worker_process("--queues", "emails,default", "--concurrency", "2", env=routed_env))
    routed_job = record.using(queue="emails").enqueue(key="live-mail")
    home_job = record.enqueue(key="live-home")
    wait_until(lambda: Effect.objects.filter(key__in=["live-mail", "live-home"]).count() == 2,
               timeout=PROCESS_TIMEOUT, procs=(proc,), what="both jobs ran")
    wait_until(lambda: raw(ROUTED, "SELECT state FROM ultimate_jobs_job") == [("done",)]
               and raw("default", "SELECT state FROM ultimate_jobs_job") == [("done",)],
               timeout=PROCESS_TIMEOUT, procs=(proc,), what="both settled on their own database")
    assert raw(ROUTED, "SELECT id FROM ultimate_jobs_job") == [(routed_job.id,)]
    assert raw("default", "SELECT id FROM ultimate_jobs_job") == [(home_job.id,)]
    # The worker's presence row is on each database it claims from.
    assert raw(ROUTED, "SELECT queues::text FROM ultimate_jobs_workerheartbeat") == [('["emails"]',)]
    assert raw("default", "SELECT queues::text FROM ultimate_jobs_workerheartbeat") == [('["default"]',)]
    proc.signal(signal.SIGTERM)
    code, _ = wait_exit(proc, PROCESS_TIMEOUT)
    assert code == 0, proc.output()


def test_jobs_relay_burst_publishes_the_outbox_of_each_database(routed, routed_env, worker_process) -> None:
    with transaction.atomic():  # staged on default, routed to jobs_routed
        home_staged = record.using(queue="emails").enqueue(key="relay-from-home")
    with transaction.atomic(using=ROUTED):  # staged on jobs_routed itself
        routed_staged = record.using(queue="emails").enqueue(key="relay-from-routed")
    proc = worker_process("--burst", env=routed_env, command="jobs_relay")
    code, _ = wait_exit(proc, PROCESS_TIMEOUT)
    assert code == 0, proc.output()
    assert "relay stopped: published=2 failed=0" in proc.output()
    assert sorted(raw(ROUTED, "SELECT id, payload->>'key' FROM ultimate_jobs_job")) == sorted(
        [(home_staged.id, "relay-from-home"), (routed_staged.id, "relay-from-routed")])
    assert raw("default", "SELECT count(*) FROM ultimate_jobs_job") == [(0,)]


def test_a_worker_of_the_routed_queue_alone_serves_the_routed_database(routed, routed_env, worker_process) -> None:
    mail = record.using(queue="emails").enqueue(key="only-mail")
    home = record.enqueue(key="left-home")
    proc = worker_process("--queues", "emails", "--burst", env=routed_env)
    code, _ = wait_exit(proc, PROCESS_TIMEOUT)
    assert code == 0, proc.output()
    assert raw(ROUTED, "SELECT id, state FROM ultimate_jobs_job") == [(mail.id, "done")]
    assert raw("default", "SELECT id, state FROM ultimate_jobs_job") == [(home.id, "ready")]
    assert list(Effect.objects.values_list("key", flat=True)) == ["only-mail"]
