"""``python manage.py jobs_relay``: publish committed outbox rows as jobs until SIGTERM (or, with --burst,
until no claimable row is left; exit 1 if a row failed to publish)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from ultimate_jobs.db.routing import aliases, check_routes
from ultimate_jobs.errors import JobsError
from ultimate_jobs.management import log_to_stderr
from ultimate_jobs.management.commands.jobs_worker import _positive_int
from ultimate_jobs.outbox import Relay
from ultimate_jobs.runtime.roles import BackgroundRoles


class Command(BaseCommand):
    help = ("Run the outbox relay: publish rows staged by committed transactions as jobs, in order, "
            "until SIGTERM finishes the pass in flight.")

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--burst", action="store_true", help="Exit once no claimable outbox row is left.")
        parser.add_argument("--batch-size", type=_positive_int,
                            help="Rows claimed and published per pass (RELAY_BATCH_SIZE, 500).")

    def handle(self, *args: Any, **options: Any) -> None:
        log_to_stderr(self, options["verbosity"])
        try:
            # QUEUE_DATABASES: each jobs database has its own outbox, so one relay each, in this process.
            check_routes()
            relays = [Relay(burst=options["burst"], batch_size=options["batch_size"], database=alias)
                      for alias in aliases()]
        except JobsError as err:
            raise CommandError(str(err)) from None
        others = BackgroundRoles({f"relay:{r.alias}": r for r in relays[1:]})
        others.start()
        try:
            stats = relays[0].run()
        finally:
            if options["burst"]:  # each burst relay ends on its own once its outbox is empty
                for thread in others.threads.values():
                    thread.join()
            others.stop()
        for other in relays[1:]:
            stats = {key: stats[key] + other.stats[key] for key in stats}
        if options["verbosity"] >= 1:
            self.stdout.write(f"relay stopped: published={stats['published']} failed={stats['failed']}")
        if options["burst"] and stats["failed"]:
            raise CommandError(f"{stats['failed']} outbox row(s) failed to publish and wait for a retry; "
                               "see jobs.outbox.publish-failed in the log.")
