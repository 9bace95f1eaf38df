"""``python manage.py jobs_backfill``: --pending as a deploy check, dry runs, --write, --all, --list."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.app.models import Post
from tests.cli import run_command
from ultimate_jobs import Worker
from ultimate_jobs.models import BackfillRun, Job
from ultimate_jobs.registry import unregister as _unregister

pytestmark = pytest.mark.django_db(transaction=True)

SLUGS = "tests.backfill.slugs"  # declared in tests/app/jobs.py, so every process knows it


def cli(*args: str) -> tuple[int, str, str]:
    return run_command("jobs_backfill", *args)


def work() -> None:
    with Worker(queues=["default"], burst=True) as worker:
        worker.run(install_signals=False)


def posts(n: int) -> None:
    Post.objects.bulk_create([Post(title=f"p{i}") for i in range(n)])


def test_pending_fails_the_deploy_check_until_every_declared_backfill_is_swept(declare_backfill) -> None:
    posts(120)
    declare_backfill(name="bf.cli.prod-only", source=lambda ctx: Post.objects.all(), handle=lambda batch: None,
                     environments=["production"])
    code, out, _ = cli("--pending")
    assert code == 1
    assert SLUGS in out and "unswept: tests.backfill.slugs" in out  # declared, never enqueued
    report = json.loads(cli("--pending", "--json")[1])
    states = {row["name"]: row["state"] for row in report["backfills"]}
    assert states[SLUGS] == "pending" and states["bf.cli.prod-only"] == "excluded"

    assert cli(SLUGS, "--write")[0] == 0
    # In flight is not an alarm: a check red for the whole of every sweep gets muted.
    code, out, _ = cli("--pending")
    assert code == 0 and "running" in out
    work()
    code, out, _ = cli("--pending")
    assert code == 0 and "all swept" in out
    assert not Post.objects.filter(slug="").exists()


def test_a_name_alone_is_a_dry_run_with_the_row_count() -> None:
    posts(42)
    code, out, _ = cli(SLUGS)
    assert code == 0 and "would sweep (42 rows match now)" in out and "--write" in out
    verdict = json.loads(cli(SLUGS, "--json")[1])
    assert (verdict["verdict"], verdict["rows"], verdict["state"]) == ("run", 42, "pending")
    assert not Job.objects.exists() and not BackfillRun.objects.exists()


def test_write_enqueues_once_and_a_completed_backfill_needs_force() -> None:
    posts(30)
    code, out, _ = cli(SLUGS, "--write")
    assert code == 0 and "enqueued, job" in out
    again = json.loads(cli(SLUGS, "--write", "--json")[1])["backfills"][0]
    assert again["verdict"] == "running" and again["enqueued"]["deduped"] is True
    assert Job.objects.filter(name=SLUGS).count() == 1
    work()

    code, out, _ = cli(SLUGS, "--write")
    assert code == 0 and "already completed" in out and "--force" in out
    assert Job.objects.filter(name=SLUGS).count() == 1
    forced = json.loads(cli(SLUGS, "--write", "--force", "--json")[1])["backfills"][0]
    assert forced["verdict"] == "run" and forced["enqueued"]["deduped"] is False
    work()
    ledger = json.loads(cli("--list", "--name", SLUGS, "--json")[1])["runs"]
    assert [(r["status"], r["forced"]) for r in ledger] == [("completed", True), ("completed", False)]
    assert ledger[1]["rows"] == 30 and ledger[0]["rows"] == 0  # the second pass found nothing left to fill


def test_all_write_isolates_each_name(declare_backfill) -> None:
    posts(5)
    declare_backfill(name="bf.cli.unmigrated", source=lambda ctx: Post.objects.all(), handle=lambda batch: None,
                     requires="testapp.0099_later")

    def broken(ctx: object) -> object:
        raise RuntimeError("source blew up")

    declare_backfill(name="bf.cli.broken", source=broken, handle=lambda batch: None)
    code, out, err = cli("--all", "--write")
    assert code == 1  # the refusals are reported...
    assert "bf.cli.unmigrated: refused, X_BACKFILL_MIGRATION_PENDING" in err
    assert "bf.cli.broken: refused, RuntimeError: source blew up" in err
    assert f"{SLUGS}: enqueued" in out  # ...and never stops the next name
    assert list(Job.objects.values_list("name", flat=True)) == [SLUGS]
    work()
    _unregister("bf.cli.unmigrated")
    _unregister("bf.cli.broken")
    code, out, _ = cli("--all", "--write")
    assert code == 0 and "nothing to sweep" in out


def test_unknown_names_and_bad_combinations_are_refused_with_exit_codes() -> None:
    code, _, err = cli("no-such-backfill")
    assert code == 1 and "X_BACKFILL_NOT_FOUND" in err and SLUGS in err
    body = json.loads(cli("no-such-backfill", "--json")[1])
    assert body["error"]["code"] == "X_BACKFILL_NOT_FOUND" and body["error"]["fix"]
    for args in ((SLUGS, "--pending"), ("--write",), ("--all", "--write", "--force"), (SLUGS, "--wait"), (),
                 ("--pending", "--status", "failed")):
        with pytest.raises(CommandError) as caught:
            call_command("jobs_backfill", *args, stdout=StringIO(), stderr=StringIO())
        assert caught.value.returncode == 2, args


def test_jobs_ls_shows_the_passes_in_flight_with_rows_so_far_and_the_cursor(declare_backfill) -> None:
    import uuid

    from django.utils import timezone

    handle = declare_backfill(name="bf.cli.in-flight", source=lambda ctx: Post.objects.all(), handle=lambda b: None)
    job = Job.objects.get(id=handle.enqueue().id)
    # The pass as the sweep leaves its ledger row between two pages: running, rows so far, the cursor.
    now = timezone.now()
    BackfillRun.objects.create(run_id=job.run_id, name="bf.cli.in-flight", job_id=job.id, status="running",
                               checksum="c", rows=2000, batches=2, last_cursor=4217, started_at=now, updated_at=now)
    BackfillRun.objects.create(run_id=uuid.uuid4(), name="bf.cli.in-flight", job_id=uuid.uuid4(),
                               status="completed", checksum="c", rows=10, batches=1, started_at=now, updated_at=now)
    code, out, _ = run_command("jobs", "ls", "--json")
    listed = json.loads(out)
    (shown,) = listed["backfills"]  # the completed pass is not in flight
    assert (shown["name"], shown["job_id"], shown["rows"], shown["batches"], shown["last_cursor"]) == (
        "bf.cli.in-flight", str(job.id), 2000, 2, 4217)
    assert [j["id"] for j in listed["jobs"]] == [str(job.id)]
    code, out, _ = run_command("jobs", "ls")
    assert code == 0 and "backfill passes in flight" in out and "4217" in out and "2000" in out
    # Filters that leave the pass out leave it out of the list too.
    for args in (["--state", "dead"], ["--name", "bf.other"], ["--tenant", "acme"], ["--queue", "other"]):
        assert json.loads(run_command("jobs", "ls", *args, "--json")[1])["backfills"] == [], args
    assert len(json.loads(run_command("jobs", "ls", "--name", "bf.cli.in-flight", "--json")[1])["backfills"]) == 1
