"""Internal: the invariants a healthy queue keeps, checked on demand (``ops.doctor()``,
``python manage.py jobs doctor``) — usable as a production health check.

Checks, each answering ``{"name", "status", "ok", "skipped", "detail", "ids"}`` (at most ``MAX_IDS``
ids); ``status`` is ``"ok"``, ``"failed"`` (offending ids listed), ``"skipped"`` (the check could
not judge what it read) or ``"not-applicable"`` (nothing it checks exists, e.g. no task is declared):

- ``stuck-running``: a ``running`` row past its lease whose worker is not alive (no unexpired
  ``WorkerHeartbeat``): nobody will rescue it until a worker starts;
- ``lease-columns``: a ``running`` row without a claim token, owner or lease expiry;
- ``live-key-unique``: one live key held by two rows (the partial unique index forbids it);
- ``attempts-in-bounds``: ``attempt`` below 0 or past ``max_attempts`` (+2 for compensation);
- ``concurrency-slots``: a fleet slot (``FleetSlot``) held for a job that is not running;
- ``scheduler-watermarks``: a scheduled task (not paused) whose first occurrence past its
  watermark is due more than ``SCHEDULER_LAG`` seconds ago; tasks declared but never armed by a
  scheduler make it ``skipped`` (no scheduler has run), no task declared makes it not applicable;
- ``outbox-backlog``: a staged outbox row unpublished for more than ``OUTBOX_MAX_AGE`` seconds;
- ``prepared-statements``: the store prepares its statements on this database (``OPTIONS`` without
  ``"prepare_threshold": None``) and the connection goes through a pooler that cannot keep them: a
  statement prepared on one server session is run again while another client holds that session
  (``db.sessions``). Fails with ``X_DB_PREPARED_STATEMENTS`` and its fix;
- ``wake``: a probe NOTIFY sent through the jobs connection is heard within 1s on a LISTEN over the
  alias the workers listen on (``LISTEN_DATABASES``); unheard, workers poll instead of waking
  (``jobs.wake.unverified`` in their log).

A check that did not run is ``skipped`` with the reason and is not ok: the report's ``ok`` (and
``jobs doctor``'s exit code) is true only when every check passed or was declared not applicable.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.db import connections
from django.db.models import Count, F, Q, Value
from django.db.models.functions import Coalesce

from ultimate_jobs import clock
from ultimate_jobs.db.listen import probe_wake
from ultimate_jobs.db.routing import listen_alias
from ultimate_jobs.db.sessions import prepared_statements_problem
from ultimate_jobs.errors import CODES, X_DB_PREPARED_STATEMENTS
from ultimate_jobs.jsoncodec import iso
from ultimate_jobs.models import FleetSlot, OutboxEntry, WorkerHeartbeat
from ultimate_jobs.models.jobs import LIVE_STATES
from ultimate_jobs.ops import routes
from ultimate_jobs.ops.rows import alias, jobs, write_now
from ultimate_jobs.ops.schedule import task_fires
from ultimate_jobs.ops.types import DoctorCheck, DoctorReport

MAX_IDS = 100
OUTBOX_MAX_AGE = 300.0
SCHEDULER_LAG = 120.0


def _result(name: str, ids: list[Any], detail: str) -> DoctorCheck:
    return DoctorCheck(name=name, status="failed" if ids else "ok", ok=not ids, skipped=False,
                       detail=detail if ids else "ok", ids=[str(i) for i in ids[:MAX_IDS]])


def _skipped(name: str, why: str) -> DoctorCheck:
    """The check could not judge: not ok, so the doctor fails until someone looks."""
    return DoctorCheck(name=name, status="skipped", ok=False, skipped=True, detail=f"skipped: {why}", ids=[])


def _not_applicable(name: str, why: str) -> DoctorCheck:
    """Nothing this check looks at exists here: ok, and said so."""
    return DoctorCheck(name=name, status="not-applicable", ok=True, skipped=False, detail=f"not applicable: {why}",
                       ids=[])


def _live_workers() -> list[str]:
    return list(WorkerHeartbeat.objects.using(alias()).filter(expires_at__gt=write_now())
                .values_list("id", flat=True))


def stuck_running() -> DoctorCheck:
    rows = jobs().filter(state="running", visible_at__lt=write_now())
    live = _live_workers()
    ids = list(rows.exclude(claimed_by__in=live).order_by("visible_at").values_list("id", flat=True)[:MAX_IDS])
    return _result("stuck-running", ids, f"{len(ids)} running job(s) past their lease with no live worker; a "
                   "worker's rescue hands them back (start one), or cancel them.")


def lease_columns() -> DoctorCheck:
    ids = list(jobs().filter(Q(claim__isnull=True) | Q(claimed_by__isnull=True) | Q(visible_at__isnull=True),
                             state="running").values_list("id", flat=True)[:MAX_IDS])
    return _result("lease-columns", ids, f"{len(ids)} running job(s) lack a claim token, owner or lease expiry.")


def live_key_unique() -> DoctorCheck:
    dupes = (jobs().filter(state__in=LIVE_STATES).annotate(tenant=Coalesce("tenant_id", Value("")))
             .values("name", "tenant", "idempotency_key").order_by().annotate(n=Count("id")).filter(n__gt=1))
    ids: list[Any] = []
    for dupe in dupes[:MAX_IDS]:
        ids += jobs().filter(state__in=LIVE_STATES, name=dupe["name"], idempotency_key=dupe["idempotency_key"]) \
            .annotate(tenant=Coalesce("tenant_id", Value(""))).filter(tenant=dupe["tenant"]) \
            .values_list("id", flat=True)
    return _result("live-key-unique", ids, "a live idempotency key is held by more than one job.")


def attempts_in_bounds() -> DoctorCheck:
    ids = list(jobs().filter(Q(attempt__lt=0) | Q(max_attempts__lt=1) | Q(attempt__gt=F("max_attempts") + 2))
               .values_list("id", flat=True)[:MAX_IDS])
    return _result("attempts-in-bounds", ids, f"{len(ids)} job(s) have an attempt count outside 0..max_attempts.")


def concurrency_slots() -> DoctorCheck:
    held = FleetSlot.objects.using(alias()).filter(expires_at__gt=write_now()).values_list("job_id", flat=True)
    running = {str(i) for i in jobs().filter(state="running").values_list("id", flat=True)}
    ids = [job_id for job_id in held if str(job_id) not in running]
    return _result("concurrency-slots", ids, f"{len(ids)} unexpired slot(s) held for jobs that are not running.")


def scheduler_watermarks() -> DoctorCheck:
    name = "scheduler-watermarks"
    fires = task_fires()
    if not fires:
        return _not_applicable(name, "no scheduled task is declared")
    armed = [fire for fire in fires if fire["armed"]]
    if not armed:
        return _skipped(name, f"{len(fires)} task(s) declared and none armed yet: no scheduler has run "
                        "(start jobs_scheduler, or jobs_worker with its scheduler role)")
    limit = clock.now() - timedelta(seconds=SCHEDULER_LAG)
    behind = [fire["name"] for fire in armed
              if not fire["paused"] and fire["missed_since"] is not None and _instant(fire["missed_since"]) < limit]
    return _result(name, behind, f"{len(behind)} task(s) missed an occurrence more than {SCHEDULER_LAG:.0f}s "
                   "ago: is a scheduler running and holding the leader lease?")


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def outbox_backlog() -> DoctorCheck:
    limit = clock.now() - timedelta(seconds=OUTBOX_MAX_AGE)
    ids = list(OutboxEntry.objects.using(alias()).filter(published_at__isnull=True, staged_at__lt=limit)
               .order_by("staged_at").values_list("pk", flat=True)[:MAX_IDS])
    return _result("outbox-backlog", ids, f"{len(ids)} staged outbox row(s) unpublished for over "
                   f"{OUTBOX_MAX_AGE:.0f}s: is a relay (jobs_relay, or jobs_worker's relay role) running?")


def _failed(name: str, detail: str, ids: list[str]) -> DoctorCheck:
    return DoctorCheck(name=name, status="failed", ok=False, skipped=False, detail=detail, ids=ids)


def prepared_statements() -> DoctorCheck:
    name, where = "prepared-statements", alias()
    if connections[where].vendor != "postgresql":
        return _not_applicable(name, "SQLite prepares nothing across connections")
    try:
        problem = prepared_statements_problem(where)
    except Exception as exc:  # the database did not answer: another check says so; this one cannot judge
        return _skipped(name, f"could not probe {where!r}: {exc!r}")
    if problem is None:
        return _result(name, [], "")
    return _failed(name, f"[{X_DB_PREPARED_STATEMENTS}] {problem}. Fix: {CODES[X_DB_PREPARED_STATEMENTS]}", [where])


def wake() -> DoctorCheck:
    name, where = "wake", alias()
    if connections[where].vendor != "postgresql":
        return _not_applicable(name, "SQLite has no LISTEN: workers poll")
    try:
        problem = probe_wake(where, listen_alias(where))
    except Exception as exc:  # a LISTEN alias that does not answer is a wake that does not work
        return _failed(name, f"could not probe the wake of {where!r} over {listen_alias(where)!r}: {exc!r}", [where])
    if problem is None:
        return _result(name, [], "")
    return _failed(name, problem, [where])


CHECKS: tuple[Callable[[], DoctorCheck], ...] = (
    stuck_running, lease_columns, live_key_unique, attempts_in_bounds, concurrency_slots, scheduler_watermarks,
    outbox_backlog, prepared_statements, wake,
)


@routes.doctor_everywhere
def doctor() -> DoctorReport:
    """Run every check; answer ``{"ok", "checked_at", "checks": [...]}`` (``ok`` false when any
    check found offending rows, whose ids it lists, or was skipped)."""
    checks = [check() for check in CHECKS]
    return DoctorReport(ok=all(c["ok"] for c in checks), checked_at=iso(clock.now()), checks=checks)
