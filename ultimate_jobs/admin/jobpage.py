"""Internal: what the job page shows — the attempt timeline, the steps with their durations, the
error only while it is the job's current state, and the same key's earlier runs.

``Job.attempts`` (one entry per settled attempt, written by the worker; ``ops.get_job`` answers
it as ``attempts``) is read defensively: rows
from before it existed have an empty list, and any entry may lack a key; the page then says so
instead of guessing. A job that is ``done`` after failed attempts shows those failures in the
timeline, never as an "Error" section as if it were current.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from django.urls import reverse

from ultimate_jobs import clock, ops
from ultimate_jobs.admin.actions import BUTTONS, failed_step
from ultimate_jobs.admin.display import EMPTY, error_is_current, headline, instant
from ultimate_jobs.models import Job
from ultimate_jobs.models.jobs import LIVE_STATES, TERMINAL_STATES
from ultimate_jobs.ops.rows import alias
from ultimate_jobs.redact import redact_text

EARLIER_RUNS = 10


def _waiting(run_at: str | None) -> bool:
    """Whether a ready job is backing off: its ``run_at`` is still ahead."""
    moment = instant(run_at)
    return moment is not None and moment > clock.now()


def offered(job: ops.JobDetail) -> list[str]:
    """The actions that make sense for this job in its current state (permissions aside)."""
    state = job["state"]
    allowed = {
        "retry": state in TERMINAL_STATES,
        "retry-from-failed-step": state in TERMINAL_STATES and bool(job["steps"]),
        "cancel": state in LIVE_STATES,
        "run-now": state == "delayed" or (state == "ready" and _waiting(job["run_at"])),
        "delete": state not in ("running", "staged"),
    }
    return [action for action in BUTTONS if allowed[action]]


def duration(start: Any, end: Any) -> str:
    """``1.25 s`` / ``3 min 4 s`` between two instants, or the en dash when either is missing."""
    began, ended = instant(start), instant(end)
    if began is None or ended is None:
        return EMPTY
    seconds = max(0.0, (ended - began).total_seconds())
    if seconds < 10:
        return f"{seconds:.2f} s"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} min {rest} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


def _text(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def _moment(value: Any) -> datetime | None:
    try:
        return instant(value) if isinstance(value, str | datetime) else None
    except ValueError:
        return None


def attempt_timeline(raw: Any) -> list[dict[str, Any]]:
    """``Job.attempts`` as rows for the page; anything malformed is skipped, never a 500."""
    rows = []
    for position, entry in enumerate(raw if isinstance(raw, list) else [], start=1):
        if not isinstance(entry, Mapping):
            continue
        error = redact_text(_text(entry.get("error")))
        started, finished = _moment(entry.get("started_at")), _moment(entry.get("finished_at"))
        worker = _text(entry.get("worker") or entry.get("worker_id"))
        rows.append({"attempt": entry.get("attempt") or position, "worker": worker or EMPTY,
                     "started_at": started, "finished_at": finished, "took": duration(started, finished),
                     "outcome": _text(entry.get("outcome")) or "?", "error_code": _text(entry.get("error_code")),
                     "error": error, "headline": headline(error)})
    return rows


def earlier_runs(job: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Other jobs of the same name, tenant and idempotency key (the key's earlier runs), newest first."""
    if job["state"] == "staged":
        return []
    rows = (Job.objects.using(alias()).filter(name=job["name"], tenant_id=job["tenant_id"],
                                               idempotency_key=job["idempotency_key"])
            .exclude(id=job["id"]).order_by("-id").values("id", "state", "created_at", "finished_at")[:EARLIER_RUNS])
    return [{**row, "id": str(row["id"]), "url": reverse("admin:ultimate_jobs_job_change", args=[str(row["id"])])}
            for row in rows]


def _pretty(value: Any) -> str | None:
    return None if value is None else json.dumps(value, indent=2, ensure_ascii=False)


def job_context(job: ops.JobDetail, actions: Sequence[str]) -> dict[str, Any]:
    """Everything the job page template reads."""
    current = error_is_current(job["state"])
    timeline = attempt_timeline(job.get("attempts"))
    steps = [{**s, "took": duration(s["started_at"], s["completed_at"]),
              "output_json": None if s["output"] is None else json.dumps(s["output"], ensure_ascii=False)}
             for s in job["steps"]]
    return {
        "title": f"{job.get('task') or job['name']} \u00b7 {job['state']}", "job": job,
        "buttons": [{"action": a, "label": BUTTONS[a][1],
                     "url": reverse("admin:ultimate_jobs_job_action", args=[job["id"], a])} for a in actions],
        "failed_step": failed_step(job), "timeline": timeline, "steps": steps,
        "error_current": current and bool(job["last_error"]),
        # A live job retrying, or a done one that failed before: the last error, labelled as past.
        "error_earlier": not current and bool(job["last_error"]) and not timeline,
        "error_headline": headline(job["last_error"]),
        "payload_json": _pretty(job["payload"]), "result_json": _pretty(job["result"]),
        "progress_json": None if job["progress"] is None else json.dumps(job["progress"]),
        "backfill_json": _pretty(job["backfill"]), "earlier_runs": earlier_runs(job),
    }
