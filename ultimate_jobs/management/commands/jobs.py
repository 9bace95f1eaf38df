"""``python manage.py jobs <subcommand> [--json]``: operate the queue from a terminal.

Subcommands: ``ls``, ``show``, ``enqueue``, ``retry``, ``cancel``, ``promote``, ``rm``, ``stats``, ``pause``,
``resume``, ``resolve-step``, ``workers``, ``tasks``, ``doctor``, ``top``, ``health``; ``--json`` on every one.
An id argument takes a whole id, its first characters or the short form ``01a23171…3bc2``.
Exit codes: 0 done, 1 a coded refusal (code, cause and fix printed, never a traceback) or ``health``
found a database not answering or a worker not alive, 2 a
usage error, 3 ``doctor`` found offending rows or skipped a check, 4 a bulk ``retry``/``promote``/
``rm`` without ``--yes`` (it printed the count it would touch and changed nothing), 141 the reader
of its output went away (``jobs stats | head``: quietly, as a command SIGPIPE ended). Writes are
logged with ``--by`` (default ``cli:<OS user>``). See docs/reference/cli.md.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from typing import Any

from django.core.management.base import BaseCommand

from ultimate_jobs.durations import to_seconds
from ultimate_jobs.errors import JobsError
from ultimate_jobs.management import raw_stream
from ultimate_jobs.management.jobs_cli import JobsCLI
from ultimate_jobs.models.jobs import STATES

EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a command a closed pipe ended


def _duration(text: str) -> float:
    try:
        return to_seconds(text, subject="--since")
    except JobsError as err:
        raise argparse.ArgumentTypeError(err.cause) from None


def _interval(text: str) -> float:
    try:
        return to_seconds(text, subject="--interval")
    except JobsError as err:
        raise argparse.ArgumentTypeError(err.cause) from None


def _limit(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def _filters(parser: Any, *, states: tuple[str, ...] = STATES) -> None:
    parser.add_argument("--state", choices=states, help="Only jobs in this state.")
    parser.add_argument("--queue", help="Only jobs of this queue.")
    parser.add_argument("--name", help="Only jobs of this job name.")
    parser.add_argument("--tenant", dest="tenant_id", help="Only jobs of this tenant id.")


def _os_user() -> str:
    try:
        return "cli:" + getpass.getuser()
    except (OSError, KeyError):  # no login name in the environment (some containers)
        return "cli"


class Command(BaseCommand):
    help = "Operate the jobs queue: list, show, enqueue, retry, cancel, promote, remove, pause, stats, doctor."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--json", action="store_true", help="Print one JSON document instead of tables.")
        parser.add_argument("--by", help="Who is acting, logged with every write (default: cli:<OS user>).")
        subs = parser.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")

        def sub(name: str, help: str) -> Any:
            child = subs.add_parser(name, help=help, description=help)
            child.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                               help="Print one JSON document instead of tables.")
            return child

        ls = sub("ls", "List jobs, newest first (keyset pages of at most 200); --state staged: the outbox's.")
        _filters(ls, states=(*STATES, "staged"))
        ls.add_argument("--id-prefix", help="Jobs whose id starts with this (hex, dashes optional).")
        ls.add_argument("--limit", type=_limit, default=50, help="Rows per page, 1 to 200 (50).")
        ls.add_argument("--after", help="The next (older) page: the 'next' cursor of the page before.")
        ls.add_argument("--before", help="The previous (newer) page: the 'previous' cursor.")
        sub("show", "One job: its row, step timeline, next retry and error.").add_argument("id")
        for name, what in (("retry", "Retry a finished job, or finished jobs matching filters (1,000 a call)."),
                           ("promote", "Run a delayed job now, or those matching filters (1,000 a call)."),
                           ("rm", "Remove a job that is not running, or those matching filters (1,000 a call).")):
            child = sub(name, what)
            child.add_argument("id", nargs="?", help="One job id (or use the filters).")
            _filters(child)
            child.add_argument("--all", action="store_true", help="Repeat the bulk call until nothing remains.")
            child.add_argument("--yes", action="store_true", help="Act on the filters' matches; without it a bulk "
                               "call prints how many jobs it would touch and exits 4, changing nothing.")
            if name == "retry":
                child.add_argument("--from-step", help="Drop this step and every later one, so they run again.")
        enqueue = sub("enqueue", "Enqueue one run of a job declared in this process (the one enqueue path).")
        enqueue.add_argument("name", help="The job's name, as declared (jobs registered by installed apps).")
        enqueue.add_argument("--input", default="{}", help="The job's keyword arguments as a JSON object ({}).")
        enqueue.add_argument("--queue", help="Another queue than the job's own.")
        enqueue.add_argument("--delay", help="Run no sooner than this from now: 30s, 10m, 3h, 2d.")
        enqueue.add_argument("--tenant", dest="tenant_id", help="The tenant it acts for (checked against the input).")
        cancel = sub("cancel", "Cancel a live job (a running one stops at its next heartbeat).")
        cancel.add_argument("id")
        cancel.add_argument("--reason", help="Why, kept on the job.")
        sub("stats", "Per-queue depth by state, the oldest ready age, and recent outcomes.").add_argument(
            "--since", type=_duration, default=3600.0, help="The outcomes' window (1h).")
        sub("pause", "Pause a queue: no worker claims from it; enqueues still land.").add_argument("queue")
        sub("resume", "Resume a paused queue.").add_argument("queue")
        resolve = sub("resolve-step", "Resolve a once=True step whose outcome is unknown, then retry the job.")
        resolve.add_argument("id")
        resolve.add_argument("step")
        outcome = resolve.add_mutually_exclusive_group(required=True)
        outcome.add_argument("--ran", dest="ran", action="store_true", help="The step's effect happened.")
        outcome.add_argument("--not-ran", dest="ran", action="store_false", help="It did not: run it again.")
        resolve.add_argument("--output", help="The step's output as JSON (with --ran).")
        sub("workers", "Live workers: host, queues, slots, in-flight jobs, last heartbeat.")
        tasks = sub("tasks", "Scheduled tasks: next run, last fire, paused.")
        toggle = tasks.add_mutually_exclusive_group()
        toggle.add_argument("--pause", metavar="TASK", help="Pause this task first.")
        toggle.add_argument("--resume", metavar="TASK", help="Resume this task first.")
        sub("doctor", "Check the queue's invariants; exit 3 with the offending ids when one fails.")
        health = sub("health", "Probe for Kubernetes/systemd: exit 0 when the jobs databases answer and the workers "
                     "are alive, else 1 with the reason.")
        health.add_argument("--worker", metavar="PREFIX", help="Require a live worker whose id or host starts "
                            "with PREFIX (default: no worker process on this host may be stuck).")
        top = sub("top", "A live table of queues, workers, tasks due and dead jobs, redrawn until Ctrl-C.")
        top.add_argument("--interval", type=_interval, default=2.0, help="Seconds between redraws (2s).")
        top.add_argument("--iterations", type=_limit, default=0, help="Stop after this many frames (0: never).")

    def handle(self, *args: Any, **options: Any) -> None:
        command = options.pop("subcommand")
        as_json = options.pop("json", False)
        by = options.pop("by", None) or _os_user()
        # Django's own options (and call_command's streams) are not the subcommand's.
        for key in ("verbosity", "settings", "pythonpath", "traceback", "no_color", "force_color", "skip_checks",
                    *self.base_stealth_options):
            options.pop(key, None)
        cli = JobsCLI(raw_stream(self.stdout), raw_stream(self.stderr), json=as_json, by=by)
        try:
            code = cli.run(command, **options)
            self.stdout.flush()
        except BrokenPipeError:
            _stdout_to_devnull()
            code = EXIT_BROKEN_PIPE
        if code:
            sys.exit(code)


def _stdout_to_devnull() -> None:
    """The reader of stdout went away (``jobs stats | head``): point the descriptor at /dev/null, so
    what Python still holds for stdout is flushed there at exit instead of raising a second time."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a real stream (call_command's StringIO)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
