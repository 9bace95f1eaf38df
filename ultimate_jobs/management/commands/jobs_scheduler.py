"""``python manage.py jobs_scheduler``: fire scheduled tasks until SIGTERM (or, with --burst, one round)."""

from __future__ import annotations

import argparse
import json
import logging
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from ultimate_jobs.durations import to_seconds
from ultimate_jobs.errors import JobsError
from ultimate_jobs.management import raw_stream
from ultimate_jobs.schedule.scheduler import Scheduler


def _duration(positive: bool) -> Any:
    def parse(text: str) -> float:
        try:
            return to_seconds(text, subject="duration", positive=positive)
        except JobsError as err:
            raise argparse.ArgumentTypeError(err.cause) from None

    return parse


class Command(BaseCommand):
    help = "Run a scheduler: fire each task's occurrences once, from whichever scheduler holds the lease."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--burst", action="store_true", help="Run one dispatch round, then exit.")
        parser.add_argument("--lease", type=_duration(True), default=30.0,
                            help="The leader lease, renewed every third of it (30s).")
        parser.add_argument("--drain-timeout", type=_duration(False),
                            help="How long SIGTERM waits for the round in flight (DRAIN_TIMEOUT, 25s).")
        parser.add_argument("--json", action="store_true", help="With --burst, print the round as JSON.")

    def handle(self, *args: Any, **options: Any) -> None:
        logger = logging.getLogger("ultimate_jobs")
        if options["verbosity"] >= 1 and not logger.handlers:
            handler = logging.StreamHandler(raw_stream(self.stderr))
            handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
            logger.addHandler(handler)
            logger.setLevel(logging.INFO if options["verbosity"] >= 2 else logging.WARNING)
        if options["json"] and not options["burst"]:
            raise CommandError("--json prints one round's answer; use it with --burst.")
        try:
            scheduler = Scheduler(lease=options["lease"], burst=options["burst"],
                                  drain_timeout=options["drain_timeout"])
        except JobsError as err:
            raise CommandError(str(err)) from None
        stats = scheduler.run()
        report = scheduler.last_round
        if options["burst"] and report is None:
            raise CommandError("the round failed before it finished; the log says why "
                               "(jobs.scheduler.round-failed).")
        if options["json"]:
            self.stdout.write(json.dumps({
                "leading": bool(report and report.leading),
                "fired": [{"task": f.task, "occurrence": f.occurrence.isoformat().replace("+00:00", "Z"),
                           "jobs": list(f.jobs)} for f in (report.fired if report else ())],
                "next_due": report.next_due.isoformat().replace("+00:00", "Z") if report and report.next_due
                else None,
            }))
        elif options["verbosity"] >= 1:
            self.stdout.write(f"scheduler stopped: rounds={stats['rounds']} fired={stats['fired']} "
                              f"jobs={stats['jobs']}")
