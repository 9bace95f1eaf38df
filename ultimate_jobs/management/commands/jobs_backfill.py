"""``python manage.py jobs_backfill``: the deploy pipeline's view of declared backfills.

Usage::

    python manage.py jobs_backfill --pending            # exit 1 while anything is unswept
    python manage.py jobs_backfill rewrite-slugs        # a dry run: the verdict and the row count
    python manage.py jobs_backfill rewrite-slugs --write [--force] [--wait]
    python manage.py jobs_backfill --all --write        # every unswept one, each on its own
    python manage.py jobs_backfill --list [--name N] [--status S] [--limit 100]

``--write`` enqueues (workers sweep); it never runs a pass inline. ``--json`` on every form.
Exit codes: 0 done, 1 unswept / refused / a waited-for pass that did not complete, 2 usage.
See docs/reference/backfill.md.
"""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from ultimate_jobs.management import raw_stream
from ultimate_jobs.management.backfill_cli import BackfillCLI
from ultimate_jobs.models.backfills import STATUSES


class Command(BaseCommand):
    help = "List, check and enqueue declared backfills (a dry run unless --write)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("name", nargs="?", help="One backfill: a dry run, or enqueue it with --write.")
        mode = parser.add_mutually_exclusive_group()
        mode.add_argument("--pending", action="store_true", help="Declared backfills and their state; exit 1 "
                          "while any is pending or failed.")
        mode.add_argument("--list", action="store_true", help="The ledger: one row per pass, newest first.")
        mode.add_argument("--all", action="store_true", help="Every pending or failed backfill, each isolated.")
        parser.add_argument("--write", action="store_true", help="Enqueue (without it: a dry run).")
        parser.add_argument("--force", action="store_true", help="Sweep a completed backfill again, into a new "
                            "ledger row.")
        parser.add_argument("--wait", action="store_true", help="With --write: follow the passes (a progress "
                            "bar) until they finish; exit 1 unless every one completed.")
        parser.add_argument("--json", action="store_true", help="Print one JSON document.")
        parser.add_argument("--name", dest="ledger_name", help="With --list: only this backfill's passes.")
        parser.add_argument("--status", choices=STATUSES, help="With --list: only passes in this status.")
        parser.add_argument("--limit", type=int, default=100, help="With --list: at most this many rows (100).")

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["name"]
        chosen = [flag for flag in ("pending", "list", "all") if options[flag]]
        if name and chosen:
            raise CommandError(f"Pass a backfill name or --{chosen[0]}, not both.", returncode=2)
        if not name and not chosen:
            raise CommandError("Name a backfill, or pass --pending, --list or --all.", returncode=2)
        if (options["write"] or options["force"] or options["wait"]) and not (name or options["all"]):
            raise CommandError("--write, --force and --wait go with a backfill name or --all.", returncode=2)
        if options["all"] and options["force"]:
            raise CommandError("--all --force would sweep every completed backfill again; force them by name.",
                               returncode=2)
        if not options["list"] and (options["ledger_name"] or options["status"] or options["limit"] != 100):
            raise CommandError("--name, --status and --limit go with --list.", returncode=2)
        if options["wait"] and not options["write"]:
            raise CommandError("--wait follows what --write enqueued; add --write.", returncode=2)
        cli = BackfillCLI(raw_stream(self.stdout), raw_stream(self.stderr), json=options["json"])
        if options["pending"]:
            code = cli.run("pending")
        elif options["list"]:
            code = cli.run("list", name=options["ledger_name"], status=options["status"], limit=options["limit"])
        elif options["all"]:
            code = cli.run("all", write=options["write"], wait=options["wait"])
        elif options["write"]:
            code = cli.run("write", names=[name], force=options["force"], wait=options["wait"])
        else:
            code = cli.run("check", name=name, force=options["force"])
        self.stdout.flush()
        if code:
            sys.exit(code)
