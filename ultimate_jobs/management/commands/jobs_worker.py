"""``python manage.py jobs_worker``: run a worker process until SIGTERM (or, with --burst, until idle)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from ultimate_jobs.conf import get_settings
from ultimate_jobs.db.routing import aliases, check_routes, group_queues
from ultimate_jobs.durations import to_seconds
from ultimate_jobs.errors import JobsError
from ultimate_jobs.management import log_to_stderr
from ultimate_jobs.outbox import Relay
from ultimate_jobs.runtime.claims import parse_concurrency
from ultimate_jobs.runtime.roles import BackgroundRoles, Service
from ultimate_jobs.runtime.routed import RoutedWorkers, SharedBurst
from ultimate_jobs.runtime.worker import Worker
from ultimate_jobs.schedule.scheduler import Scheduler

ROLES = ("worker", "scheduler", "relay")
ROLE_CLASSES: dict[str, Callable[[], Service]] = {"relay": Relay, "scheduler": Scheduler}


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def _concurrency(text: str) -> int | dict[str, int]:
    """``--concurrency``: a number, or queue=number pairs; a bad one is argparse's usage error
    (exit 2) carrying ``X_CONFIG_INVALID``, never int()'s message."""
    try:
        return parse_concurrency(text, [])
    except JobsError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _duration(text: str) -> float:
    try:
        return to_seconds(text, subject="--drain-timeout", positive=False)
    except JobsError as err:
        raise argparse.ArgumentTypeError(err.cause) from None


def _roles(text: str) -> list[str]:
    roles = [r.strip() for r in text.split(",") if r.strip()]
    unknown = [r for r in roles if r not in ROLES]
    if not roles or unknown:
        raise argparse.ArgumentTypeError(f"roles must be drawn from {', '.join(ROLES)}")
    return roles


def _role_name(role: str, alias: str) -> str:
    return role if alias == get_settings().DATABASE else f"{role}:{alias}"


def _burst_relays() -> SharedBurst:
    """A burst worker's ``on_idle``: a pass of the relay on each jobs database, shared by the claim
    loops (``SharedBurst``: a loop passes again when any relay published)."""
    return SharedBurst([Relay(database=alias).burst_pass for alias in aliases()])


class Command(BaseCommand):
    help = "Run a jobs worker: claim, run and settle jobs until SIGTERM drains it."
    _default_roles = list(ROLES)

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--queues", help="Comma-separated queues (default: the QUEUES setting).")
        parser.add_argument("--concurrency", type=_concurrency,
                            help="Slots: a number shared by the queues, or a=4,b=2 per queue.")
        parser.add_argument("--max-in-flight", type=_positive_int, help="Cap on this process's runs in flight.")
        parser.add_argument("--roles", type=_roles, default=self._default_roles,
                            help="Comma-separated roles: worker,scheduler,relay (default: all three).")
        parser.add_argument("--burst", action="store_true", help="Exit once nothing is runnable or in flight.")
        parser.add_argument("--drain-timeout", type=_duration, help="How long SIGTERM waits for runs (25s).")

    def handle(self, *args: Any, **options: Any) -> None:
        log_to_stderr(self, options["verbosity"])
        queues = [q.strip() for q in options["queues"].split(",") if q.strip()] if options["queues"] else None
        roles = options["roles"]
        if "worker" not in roles:
            raise CommandError("jobs_worker needs the worker role; run jobs_relay or jobs_scheduler for one role.")
        background_roles = [r for r in roles if r != "worker"]
        burst_relay = options["burst"] and "relay" in background_roles
        if burst_relay:
            # A burst worker publishes what is staged before it decides nothing is runnable, so a
            # job enqueued inside a transaction (or by a job body inside one) is not left behind.
            background_roles.remove("relay")
        try:
            # QUEUE_DATABASES: one claim loop per database holding some of the queues, in this process.
            check_routes()
            groups = group_queues(queues if queues is not None else get_settings().QUEUES) or {
                get_settings().DATABASE: []}  # no queue at all: the Worker names that refusal
            concurrency = parse_concurrency(options["concurrency"], [q for qs in groups.values() for q in qs])
            shared = _burst_relays() if burst_relay else None
            workers = {alias: Worker(queues=group, database=alias,
                                     concurrency=({q: concurrency[q] for q in group}
                                                  if isinstance(concurrency, dict) else concurrency),
                                     max_in_flight=options["max_in_flight"], burst=options["burst"],
                                     drain_timeout=options["drain_timeout"],
                                     on_idle=shared.for_loop() if shared is not None else None)
                       for alias, group in groups.items()}
        except (JobsError, ValueError) as err:
            raise CommandError(str(err)) from None
        services: dict[str, Service] = {}
        for role in background_roles:
            if role == "relay":  # a relay per jobs database: each has its own outbox
                services.update({_role_name(role, alias): Relay(database=alias) for alias in aliases()})
            else:
                services[role] = ROLE_CLASSES[role]()
        background = BackgroundRoles(services)
        background.start()
        try:
            stats = next(iter(workers.values())).run() if len(workers) == 1 else RoutedWorkers(workers).run()
        finally:
            background.stop()
        if options["verbosity"] >= 1:
            self.stdout.write(f"worker stopped: claimed={stats['claimed']} settled={stats['settled']} "
                              f"interrupted={stats['interrupted']} shed={stats['shed']} lost={stats['lost']}"
                              # lost: attempts whose outcome was discarded because the row stopped being
                              # this worker's (an operator's cancel, or a lapsed lease another worker took).
                              + (" (lost: results not stored because the job was cancelled or reclaimed "
                                 "meanwhile; see jobs.settle.unowned in the log)" if stats["lost"] else ""))
