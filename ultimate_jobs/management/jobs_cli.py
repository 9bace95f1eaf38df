"""Internal: what ``python manage.py jobs <subcommand>`` does, over ``ultimate_jobs.ops`` only.

``JobsCLI`` runs one subcommand and answers its exit code: 0 done, 1 a coded refusal
(``JobsError``: printed as code, cause and fix, never a traceback), 3 ``doctor`` found
offending rows or skipped a check (``health``: 1 when unhealthy), 4 a bulk write not confirmed
(without ``--yes`` it prints how many jobs it would touch and writes nothing); argparse's usage
errors exit 2. Every write passes ``by`` (``--by``, else ``cli:<OS user>``) to ``ops``, which
logs it. With ``json=True`` each subcommand prints exactly one JSON document on stdout — the
``ops`` answer as it is, or ``{"error": {"code", "cause", "fix"}}`` — so ``| jq`` always parses;
otherwise it prints tables (``render.Screen``: ``rich`` when installed, plain text when not,
control characters escaped).
Everything shown has passed the redactor (``ops`` redacts).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import IO, Any

from ultimate_jobs import clock, ops
from ultimate_jobs.errors import X_JOB_INPUT_INVALID, JobsError
from ultimate_jobs.management.render import Screen, clean, json_text
from ultimate_jobs.ops.types import BackfillRunInfo
from ultimate_jobs.registry import get_job_handle

EXIT_OK, EXIT_REFUSED, EXIT_UNHEALTHY, EXIT_UNCONFIRMED = 0, 1, 3, 4
EXIT_PROBE_FAILED = 1  # ``health``: what a Kubernetes exec probe or a systemd check reads as a failure


def _last_line(text: str | None) -> str | None:
    """An attempt's error in a table row: a traceback's last line, the exception itself."""
    lines = (text or "").strip().splitlines()
    return lines[-1] if lines else None


_LIST_COLUMNS = ("id", "state", "queue", "name", "tenant_id", "attempt", "run_at", "error_code")
_PASS_COLUMNS = ("name", "job_id", "batches", "rows", "last_cursor", "started_at", "updated_at")
_LIVE = (None, "ready", "delayed", "running", "suspended")


def _passes_in_flight(*, state: str | None = None, queue: str | None = None, name: str | None = None,
                      tenant_id: str | None = None, id_prefix: str | None = None, after: str | None = None,
                      before: str | None = None, **_: Any) -> list[BackfillRunInfo]:
    """The backfill passes in flight (ledger ``running``), with rows so far and the cursor, that the
    ``ls`` filters leave in: shown with the first page, under a live or no ``--state``."""
    if state not in _LIVE or id_prefix or after or before:
        return []
    passes = ops.backfill_runs(name=name, status="running")
    if tenant_id is not None:
        passes = [p for p in passes if p["tenant_id"] == tenant_id]
    if queue is not None:
        passes = [p for p in passes if getattr(get_job_handle(str(p["name"])), "queue", queue) == queue]
    return passes


class JobsCLI:
    """One invocation: ``JobsCLI(stdout, stderr, json=...).run("ls", state="dead")``."""

    def __init__(self, stdout: IO[str], stderr: IO[str], *, json: bool = False, by: str | None = None) -> None:
        self.json = json
        self.by = by
        self.stdout, self.stderr = stdout, stderr
        # rich when installed, plain text when not (render.Screen); control characters escaped.
        self.console = Screen(stdout)

    def run(self, command: str, **options: Any) -> int:
        handler: Callable[..., int] = getattr(self, "do_" + command.replace("-", "_"))
        try:
            return handler(**options)
        except JobsError as err:
            if self.json:
                self._json({"error": {"code": err.code, "cause": err.cause, "fix": err.fix}})
            else:
                self.stderr.write(clean(f"{err.code}: {err.cause}\nFix: {err.fix}") + "\n")
            return EXIT_REFUSED

    # -- output --------------------------------------------------------------------------------

    def _json(self, data: Any) -> None:
        self.stdout.write(json_text(data) + "\n")

    def _table(self, rows: Sequence[Mapping[str, Any]], columns: tuple[str, ...] | list[str], title: str | None = None,
               empty: str = "(none)") -> None:
        self.console.table(rows, columns, title, empty)

    def _answer(self, data: Any, human: Callable[[], None]) -> int:
        if self.json:
            self._json(data)
        else:
            human()
        return EXIT_OK

    # -- subcommands ---------------------------------------------------------------------------

    def do_ls(self, **filters: Any) -> int:
        page = ops.list_jobs(**{k: v for k, v in filters.items() if v is not None})
        passes = _passes_in_flight(**filters)

        def human() -> None:  # a Django task is named by its own module path, not the one job all run as
            rows = [{**job, "name": job.get("task") or job["name"]} for job in page["jobs"]]
            self._table(rows, _LIST_COLUMNS, empty="no jobs match")
            if page["next"]:
                self.console.print(f"older: --after {page['next']}")
            if page["previous"]:
                self.console.print(f"newer: --before {page['previous']}")
            if passes:
                self._table(passes, _PASS_COLUMNS, title="backfill passes in flight")
        return self._answer({**page, "backfills": passes}, human)

    def do_show(self, *, id: str) -> int:
        job = ops.get_job(ops.resolve_job_id(id))

        def human() -> None:
            fields = [{"field": k, "value": v} for k, v in job.items() if k not in ("steps", "attempts", "last_error",
                                                                                 "payload", "result")]
            fields += [{"field": "payload", "value": job["payload"]}, {"field": "result", "value": job["result"]}]
            self._table(fields, ("field", "value"), title=f"job {job['id']}")
            attempts = [{**a, "error": _last_line(a["error"])} for a in job["attempts"]]
            self._table(attempts, ("attempt", "outcome", "worker", "started_at", "finished_at", "error_code",
                                   "error"), title="attempts", empty="no attempt settled yet")
            self._table(job["steps"], ("name", "status", "executions", "output", "error", "completed_at"),
                        title="steps", empty="no steps recorded")
            if job["last_error"]:
                self.console.print("last error:")
                self.console.print(job["last_error"], markup=False)
        return self._answer(job, human)

    def _one_or_many(self, verb: str, one: Callable[..., Mapping[str, Any]], many: Callable[..., Mapping[str, Any]],
                     id: str | None, filters: dict[str, Any], repeat: bool, yes: bool, **extra: Any) -> int:
        filters = {k: v for k, v in filters.items() if v is not None}
        if id is not None:
            if filters:
                raise JobsError(X_JOB_INPUT_INVALID, "Give one job id or filters (--state/--queue/...), not both.")
            job = one(ops.resolve_job_id(id), by=self.by, **extra)
            return self._answer(job, lambda: self.console.print(
                f"{job['id']}: {job.get('state', 'removed' if job.get('removed') else '?')}"))
        if extra.get("from_step"):
            raise JobsError(X_JOB_INPUT_INVALID, "--from-step names a step of one job: pass its id.")
        if not yes:
            return self._unconfirmed(verb, many(**filters, dry_run=True)["remaining"], repeat)
        total = {"affected": 0, "remaining": 0}
        while True:
            answer = many(**filters, by=self.by)
            total = {"affected": total["affected"] + answer["affected"], "remaining": answer["remaining"]}
            if not repeat or not answer["remaining"] or not answer["affected"]:
                break
        return self._answer(total, lambda: self.console.print(
            f"affected {total['affected']}, remaining {total['remaining']}"
            + ("" if repeat or not total["remaining"] else " (run again, or pass --all)")))

    def _unconfirmed(self, verb: str, matching: int, repeat: bool) -> int:
        """A bulk write without ``--yes``: say what it would touch, write nothing, exit 4."""
        touch = matching if repeat else min(matching, ops.MAX_BULK)
        if self.json:
            self._json({"confirm": {"action": verb, "matching": matching, "would_touch": touch, "done": False}})
        else:
            self.stderr.write(f"{verb} would touch {touch} job(s) ({matching} match the filters); nothing was "
                              "changed. Run it again with --yes to proceed.\n")
        return EXIT_UNCONFIRMED

    def do_retry(self, *, id: str | None, from_step: str | None, all: bool, yes: bool = False, **filters: Any) -> int:
        return self._one_or_many("retry", ops.retry_job, ops.requeue_many, id, filters, all, yes,
                                 **({"from_step": from_step} if from_step else {}))

    def do_promote(self, *, id: str | None, all: bool, yes: bool = False, **filters: Any) -> int:
        return self._one_or_many("promote", ops.promote_job, ops.promote_many, id, filters, all, yes)

    def do_rm(self, *, id: str | None, all: bool, yes: bool = False, **filters: Any) -> int:
        return self._one_or_many("rm", ops.remove_job, ops.remove_many, id, filters, all, yes)

    def do_enqueue(self, *, name: str, input: str, queue: str | None, delay: str | None,
                   tenant_id: str | None) -> int:
        job = ops.enqueue_job(name, input, queue=queue, delay=delay, tenant_id=tenant_id, by=self.by)
        how = "staged (the relay publishes it)" if job["staged"] else (
            "deduped into the live job holding its key" if job["deduped"] else "enqueued")
        return self._answer(job, lambda: self.console.print(f"{job['id']}: {how} ({job['name']} on {job['queue']})"))

    def do_cancel(self, *, id: str, reason: str | None) -> int:
        job = ops.cancel_job(ops.resolve_job_id(id), reason=reason, by=self.by)
        return self._answer(job, lambda: self.console.print(
            f"{job['id']}: cancelled" + (" (a running job stops at its next heartbeat)" if job["started_at"] else "")))

    def do_stats(self, *, since: float) -> int:
        stats = ops.queue_stats()
        outcomes = ops.counters(since=clock.now() - timedelta(seconds=since))
        # "overview": every number the admin's overview page shows (ops.overview), charts' series included.
        data = {"queues": stats, "paused": ops.paused_queues(), "outcomes": outcomes, "overview": ops.overview()}

        def human() -> None:
            self._table(stats, ("queue", "staged", "ready", "delayed", "running", "suspended", "failed", "dead",
                                "done", "cancelled", "oldest_ready_age", "paused"), title="queues", empty="no queues")
            rows = [{"outcome": k, "count": v} for k, v in sorted(outcomes["totals"].items())]
            self._table(rows, ("outcome", "count"), title=f"outcomes since {outcomes['since']}",
                        empty="nothing settled")
        return self._answer(data, human)

    def do_pause(self, *, queue: str) -> int:
        answer = ops.pause_queue(queue, by=self.by)
        return self._answer(answer, lambda: self.console.print(f"{queue}: paused since {answer['paused_at']}"))

    def do_resume(self, *, queue: str) -> int:
        answer = ops.resume_queue(queue, by=self.by)
        return self._answer(answer, lambda: self.console.print(
            f"{queue}: resumed" if answer["was_paused"] else f"{queue}: was not paused"))

    def do_resolve_step(self, *, id: str, step: str, ran: bool, output: str | None) -> int:
        kwargs: dict[str, Any] = {"ran": ran}
        if output is not None:
            try:
                kwargs["output"] = json.loads(output)
            except ValueError:
                raise JobsError(X_JOB_INPUT_INVALID, f"--output {output!r} is not JSON.",
                                'Quote a JSON value, e.g. --output \'{"charge_id": "ch_1"}\'.') from None
        id = ops.resolve_job_id(id)
        answer = ops.resolve_step(id, step, by=self.by, **kwargs)
        return self._answer(answer, lambda: self.console.print(f"{id}: step {step!r} resolved (ran={ran})"))

    def do_workers(self) -> int:
        rows = ops.workers()  # --json: an object like every other subcommand's, the list under "workers"
        return self._answer({"workers": rows}, lambda: self._table(
            rows, ("id", "status", "host", "pid", "queues", "slots", "in_flight_count", "started_at",
                   "last_heartbeat_at", "last_heartbeat_age"), empty="no workers"))

    def do_tasks(self, *, pause: str | None, resume: str | None) -> int:
        if pause:
            ops.pause_task(pause, by=self.by)
        elif resume:
            ops.resume_task(resume, by=self.by)
        tasks = ops.scheduled_tasks()
        return self._answer({"tasks": tasks}, lambda: self._table(
            tasks, ("task", "next_run", "last_fire", "paused"), empty="no scheduled tasks"))

    def do_top(self, *, interval: float, iterations: int) -> int:
        """The overview, redrawn every ``interval`` seconds (``management.top``); ``--json``: one
        ``ops.overview()`` document, then exit."""
        from ultimate_jobs.management.top import Top

        if self.json:
            return self._answer(ops.overview(), lambda: None)
        return Top(self.stdout, interval=interval, iterations=iterations or None).run()

    def do_doctor(self) -> int:
        report = ops.doctor()

        def human() -> None:
            self._table([{**c, "status": "FAILED" if c["status"] == "failed" else c["status"],
                          "ids": " ".join(c["ids"])} for c in report["checks"]],
                        ("name", "status", "detail", "ids"), title="doctor")
            self.console.print("healthy" if report["ok"] else "UNHEALTHY")
        self._answer(report, human)
        return EXIT_OK if report["ok"] else EXIT_UNHEALTHY


    def do_health(self, *, worker: str | None) -> int:
        report = ops.health(worker=worker)

        def human() -> None:
            self._table(report["databases"], ("alias", "ok", "error"), title="databases")
            self._table(report["workers"], ("id", "verdict", "status", "last_heartbeat_age"),
                        title=f"workers ({'--worker ' + worker if worker else 'on ' + report['host']})",
                        empty="no worker matches")
            for reason in report["reasons"]:
                self.console.print(f"unhealthy: {reason}", markup=False)
            self.console.print("healthy" if report["ok"] else "UNHEALTHY")
        self._answer(report, human)
        return EXIT_OK if report["ok"] else EXIT_PROBE_FAILED
