"""Internal: what ``python manage.py jobs_backfill`` does, over ``ultimate_jobs.ops`` only.

Exit codes: 0 done (or nothing to do), 1 something is unswept (``--pending``), refused (a gate's
``X_BACKFILL_*``, an unknown name) or, with ``--wait``, a pass that did not complete; 2 a usage
error. ``--json`` prints exactly one JSON document.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from ultimate_jobs import ops
from ultimate_jobs.errors import JobsError
from ultimate_jobs.management.jobs_cli import EXIT_OK, EXIT_REFUSED, JobsCLI
from ultimate_jobs.management.render import clean
from ultimate_jobs.redact import redact_text

_STATE_COLUMNS = ("name", "state", "requires", "environments", "last_run", "rows", "completed")
_LEDGER_COLUMNS = ("name", "status", "run_id", "rows", "batches", "forced", "started_at", "completed_at",
                   "error_code")
_FINISHED = ("done", "failed", "dead", "cancelled")


class BackfillCLI(JobsCLI):
    """One invocation: ``BackfillCLI(stdout, stderr, json=...).run("pending")``."""

    def do_pending(self) -> int:
        report = ops.pending_backfills()

        def human() -> None:
            rows = [{**row, "environments": ", ".join(row["environments"] or ["every"]),
                     "last_run": (row["last_run"] or {}).get("status"),
                     "rows": (row["completed_run"] or row["last_run"] or {}).get("rows"),
                     "completed": (row["completed_run"] or {}).get("completed_at")} for row in report["backfills"]]
            self._table(rows, _STATE_COLUMNS, title=f"backfills (environment: {report['environment'] or 'unset'})",
                        empty="none declared")
            moved = [row["name"] for row in report["backfills"] if row["checksum_moved"]]
            if moved:
                self.console.print(f"changed since their completed pass (not swept again without --force): "
                                   f"{', '.join(moved)}", markup=False)
            if report["orphaned"]:
                self.console.print(f"in the ledger but no longer declared: {', '.join(report['orphaned'])}",
                                   markup=False)
            self.console.print(f"unswept: {', '.join(report['pending'])}" if report["pending"] else "all swept",
                               markup=False)
        self._answer(report, human)
        return EXIT_REFUSED if report["pending"] else EXIT_OK

    def do_list(self, *, name: str | None, status: str | None, limit: int) -> int:
        runs = ops.backfill_runs(limit, name=name, status=status)
        return self._answer({"runs": runs}, lambda: self._table(runs, _LEDGER_COLUMNS, empty="the ledger is empty"))

    def do_check(self, *, name: str, force: bool) -> int:
        """A dry run: the gate's verdict and the row count; nothing is written."""
        verdict = ops.gate_backfill(name, force=force)
        self._answer(verdict, lambda: self._say(verdict, dry_run=True))
        return EXIT_REFUSED if verdict["verdict"] == "refused" else EXIT_OK

    def do_write(self, *, names: list[str], force: bool, wait: bool) -> int:
        """Gate, then enqueue each name; one name's refusal or error never stops the next."""
        outcomes: list[dict[str, Any]] = []
        for name in names:
            try:
                verdict = ops.gate_backfill(name, force=force, count_rows=wait)
                if verdict["verdict"] == "run" or verdict["verdict"] == "running":
                    verdict["enqueued"] = ops.enqueue_backfill(name, force=force)
            except JobsError as err:
                verdict = {"name": name, "verdict": "refused", "code": err.code, "reason": err.cause}
            except Exception as exc:  # a broken source() or count() stops its own name, never the next
                verdict = {"name": name, "verdict": "refused", "code": type(exc).__name__,
                           "reason": redact_text(str(exc))}  # user code's text: it may quote a secret
            outcomes.append(verdict)
            if not self.json:
                self._say(verdict, dry_run=False)
        if not names and not self.json:
            self.console.print("nothing to sweep", markup=False)
        enqueued = [o for o in outcomes if "enqueued" in o]
        if wait and enqueued:
            self._wait(enqueued)
        if self.json:
            self._json({"backfills": outcomes})
        failed = any(o["verdict"] == "refused" or o.get("final_state") not in (None, "done") for o in outcomes)
        return EXIT_REFUSED if failed else EXIT_OK

    def do_all(self, *, write: bool, wait: bool) -> int:
        pending = ops.pending_backfills()["pending"]
        if write:
            return self.do_write(names=pending, force=False, wait=wait)
        verdicts = [ops.gate_backfill(name) for name in pending]
        if self.json:
            self._json({"backfills": verdicts})
        else:
            for verdict in verdicts:
                self._say(verdict, dry_run=True)
            if not verdicts:
                self.console.print("nothing to sweep", markup=False)
        return EXIT_REFUSED if any(v["verdict"] == "refused" for v in verdicts) else EXIT_OK

    # -- output --------------------------------------------------------------------------------

    def _say(self, verdict: dict[str, Any], *, dry_run: bool) -> None:
        name, kind = verdict["name"], verdict["verdict"]
        rows = "" if verdict.get("rows") is None else f" ({verdict['rows']:,} rows match now)"
        if kind == "refused":
            self.stderr.write(clean(f"{name}: refused, {verdict['code']}: {verdict['reason']}") + "\n")
        elif kind == "completed":
            self.console.print(f"{name}: already completed (run {verdict['completed_run']['run_id']}); "
                               f"--force sweeps again{rows}", markup=False)
        elif "enqueued" in verdict:
            job = verdict["enqueued"]
            joined = "joined the live pass" if job["deduped"] else "enqueued"
            self.console.print(f"{name}: {joined}, job {job['job_id']}{rows}", markup=False)
        elif kind == "running":
            self.console.print(f"{name}: a pass is running{rows}", markup=False)
        else:
            self.console.print(f"{name}: would sweep{rows}" + (" — dry run, pass --write to enqueue" if dry_run
                                                               else ""), markup=False)

    def _wait(self, outcomes: list[dict[str, Any]], poll: float = 0.5) -> None:
        """Follow each enqueued pass until its job finishes: on a terminal with ``rich`` installed, a
        progress bar per backfill (rows from the ledger, out of the rows the gate counted)."""
        with _bars(self.console.rich if self.stdout.isatty() and not self.json else None) as bars:
            tasks = {o["name"]: bars.add_task(o["name"], total=o.get("rows") or None) for o in outcomes}
            waiting = {o["name"]: o for o in outcomes}
            while waiting:
                for name, outcome in list(waiting.items()):
                    job = ops.get_job(outcome["enqueued"]["job_id"])
                    ledger: Mapping[str, Any] = job["backfill"] or {}
                    bars.update(tasks[name], completed=ledger.get("rows") or 0)
                    if job["state"] in _FINISHED:
                        outcome.update(final_state=job["state"], result=job["result"], error_code=job["error_code"],
                                       backfill=job["backfill"])
                        del waiting[name]
                if waiting:
                    time.sleep(poll)
        if not self.json:
            for outcome in outcomes:
                result = outcome.get("result") or {}
                detail = (f"{result.get('rows', 0):,} rows in {result.get('batches', 0)} batches"
                          + (" (skipped: a completed pass exists)" if result.get("skipped") else ""))
                if outcome["final_state"] != "done":
                    detail = f"{outcome['final_state']}: {outcome['error_code']}"
                self.console.print(f"{outcome['name']}: {detail}", markup=False)


class _NoBars:
    """Stands in for ``rich.progress.Progress`` where there is no terminal or no ``rich``."""

    def __enter__(self) -> _NoBars:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def add_task(self, description: str, total: float | None = None) -> int:
        return 0

    def update(self, task: int, completed: float) -> None:
        return None


def _bars(console: Any) -> Any:
    """Progress bars drawn on ``console`` (a ``rich`` console), or none when it is None."""
    if console is None:
        return _NoBars()
    from rich.progress import (  # optional: a rich console exists, so rich is installed
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console)
