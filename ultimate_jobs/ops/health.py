"""Internal: ``health()``, the answer ``jobs health`` gives an orchestrator's probe.

Usage::

    from ultimate_jobs import ops
    report = ops.health()                   # this host's workers
    report = ops.health(worker="web-7f9c")  # a live worker whose id or host starts with this
    report["ok"], report["reasons"]         # -> False, ["database 'jobs_emails' does not answer: ..."]

Healthy when every jobs database (``DATABASE`` and each ``QUEUE_DATABASES`` alias) answers, and:

- with ``worker``: at least one worker whose id or host starts with ``worker`` is alive (its last
  heartbeat within its ``VISIBILITY_TIMEOUT``; ``ops.workers()`` also lists the presumed dead,
  which never count);
- without: no worker process on this host is stuck — every one of its rows whose process still
  runs here has a fresh heartbeat. A row left by a process that is gone (killed; the orchestrator
  restarts those itself) is not a failure, nor one a newer process with the same pid replaced (a
  restarted container). A host with no worker at all is healthy: the databases answered.

Each answer is a ``HealthReport``: ``ok``, ``reasons`` (one line per failure), ``databases``
(``alias``, ``ok``, ``error``) and ``workers`` (the matching rows, each with ``verdict``: ``alive``,
``stuck``, ``gone``, ``replaced`` or ``presumed-dead``).
"""

from __future__ import annotations

import os
import socket
from datetime import datetime
from typing import Literal, TypedDict

from django.db import connections

from ultimate_jobs.db.routing import aliases
from ultimate_jobs.ops.queues import workers
from ultimate_jobs.ops.rows import on_database
from ultimate_jobs.ops.types import WorkerInfo

Verdict = Literal["alive", "stuck", "gone", "replaced", "presumed-dead"]


class DatabaseHealth(TypedDict):
    alias: str
    ok: bool
    error: str | None


class WorkerHealth(TypedDict):
    id: str
    host: str
    pid: int
    status: str
    last_heartbeat_age: float
    verdict: Verdict


class HealthReport(TypedDict):
    ok: bool
    reasons: list[str]
    host: str
    worker: str | None
    databases: list[DatabaseHealth]
    workers: list[WorkerHealth]


def _answers(alias: str) -> DatabaseHealth:
    conn = connections[alias]
    try:
        conn.ensure_connection()
        if conn.is_usable():
            return DatabaseHealth(alias=alias, ok=True, error=None)
        error = "the connection opened but a query on it failed"
    except Exception as exc:  # any failure to reach it is the answer, never a traceback
        error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    try:
        conn.close()  # a probe runs again later: never keep a broken session
    except Exception:  # closing a broken connection may fail; nothing to keep
        pass
    return DatabaseHealth(alias=alias, ok=False, error=error)


def _runs_here(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    return True


def _verdict(row: WorkerInfo, rows: list[WorkerInfo], host: str) -> Verdict:
    if row["status"] == "alive":
        return "alive"
    if row["host"] != host:
        return "presumed-dead"
    if not _runs_here(row["pid"]):
        return "gone"
    beat = datetime.fromisoformat(row["last_heartbeat_at"])
    if any(other["pid"] == row["pid"] and other["status"] == "alive"
           and datetime.fromisoformat(other["started_at"]) > beat for other in rows):
        return "replaced"  # a newer process with the same pid started after this row's last beat
    return "stuck"


def health(*, worker: str | None = None) -> HealthReport:
    """See the module docstring."""
    host = socket.gethostname()[:255]
    databases = [_answers(alias) for alias in aliases()]
    reasons = [f"database {d['alias']!r} does not answer: {d['error']}" for d in databases if not d["ok"]]
    rows: list[WorkerInfo] = []
    for entry in databases:
        if entry["ok"]:
            with on_database(entry["alias"]):
                rows += workers()
    mine = [r for r in rows if (r["id"].startswith(worker) or r["host"].startswith(worker))] if worker else [
        r for r in rows if r["host"] == host]
    found = [WorkerHealth(id=r["id"], host=r["host"], pid=r["pid"], status=r["status"],
                          last_heartbeat_age=r["last_heartbeat_age"], verdict=_verdict(r, mine, host)) for r in mine]
    if worker:
        if not any(w["verdict"] == "alive" for w in found):
            dead = len(found)
            reasons.append(f"no live worker whose id or host starts with {worker!r}"
                           + (f" ({dead} presumed dead: last heartbeat past VISIBILITY_TIMEOUT)" if dead else ""))
    else:
        reasons += [f"worker {w['id']} on this host is stuck: its process runs but its last heartbeat was "
                    f"{w['last_heartbeat_age']:.0f}s ago, past VISIBILITY_TIMEOUT" for w in found
                    if w["verdict"] == "stuck"]
    return HealthReport(ok=not reasons, reasons=reasons, host=host, worker=worker, databases=databases,
                        workers=found)
