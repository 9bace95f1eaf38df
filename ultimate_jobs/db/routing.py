"""Internal: which database alias holds a queue's jobs (``ULTIMATE_JOBS["QUEUE_DATABASES"]``).

Usage::

    # settings.py
    DATABASES = {"default": {...}, "jobs_emails": {...}}        # a second PostgreSQL cluster
    ULTIMATE_JOBS = {"QUEUE_DATABASES": {"emails": "jobs_emails"}}

    from ultimate_jobs.db.routing import alias_for_queue, aliases, group_queues
    alias_for_queue("emails")             # -> "jobs_emails"
    alias_for_queue("default")            # -> "default" (the DATABASE setting)
    aliases()                             # -> ["default", "jobs_emails"]
    group_queues(["default", "emails"])   # -> {"default": ["default"], "jobs_emails": ["emails"]}

A routed queue's jobs live on its alias whatever ``database=`` an enqueue names: the route is
where the workers, the relay, ``ops`` and the admin look for them. An unrouted queue's jobs live
on ``database=`` when given, else on ``DATABASE``. The fleet rows that are not about one queue
(the scheduler's leader lease and watermarks) stay on ``DATABASE``; a worker's presence row,
fleet concurrency slots and queue pauses live on the alias its claim loop serves.

``check_routes()`` is what the system check runs: a routed alias must be in ``DATABASES`` and be
PostgreSQL (a separate cluster is the point of routing; SQLite has one writer per file).
"""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings as django_settings
from django.db import connections

from ultimate_jobs.conf import get_settings
from ultimate_jobs.errors import X_CONFIG_INVALID, JobsError


def alias_for_queue(queue: str, *, home: str | None = None) -> str:
    """The alias holding ``queue``'s jobs: its route, else ``home``, else ``DATABASE``."""
    conf = get_settings()
    return conf.QUEUE_DATABASES.get(queue) or home or conf.DATABASE


def is_routed(queue: str) -> bool:
    return queue in get_settings().QUEUE_DATABASES


def aliases() -> list[str]:
    """Every alias that may hold jobs: ``DATABASE`` first, then each routed alias once."""
    conf = get_settings()
    found = [conf.DATABASE]
    for alias in conf.QUEUE_DATABASES.values():
        if alias not in found:
            found.append(alias)
    return found


def group_queues(queues: Iterable[str], *, home: str | None = None) -> dict[str, list[str]]:
    """``queues`` grouped by the alias holding their jobs, each group in the given order."""
    groups: dict[str, list[str]] = {}
    for queue in queues:
        groups.setdefault(alias_for_queue(queue, home=home), []).append(queue)
    return groups


def check_routes() -> None:
    """Raise ``X_CONFIG_INVALID`` for a route to an alias missing from ``DATABASES`` or not PostgreSQL."""
    for queue, alias in get_settings().QUEUE_DATABASES.items():
        check_route(queue, alias)


def check_route(queue: str, alias: str) -> None:
    """Raise ``X_CONFIG_INVALID`` unless ``alias`` is in ``DATABASES`` and is PostgreSQL (a route to
    ``DATABASE`` itself changes nothing and is let be)."""
    if alias == get_settings().DATABASE:
        return
    if alias not in django_settings.DATABASES:
        raise JobsError(X_CONFIG_INVALID, f"ULTIMATE_JOBS['QUEUE_DATABASES'] routes queue {queue!r} to {alias!r}, "
                        "which is not in DATABASES.", f"Add {alias!r} to DATABASES (then manage.py migrate "
                        f"--database {alias}), or remove the route.")
    vendor = connections[alias].vendor
    if vendor != "postgresql":
        raise JobsError(X_CONFIG_INVALID, f"ULTIMATE_JOBS['QUEUE_DATABASES'] routes queue {queue!r} to {alias!r}, "
                        f"which is {vendor}; a routed queue needs its own PostgreSQL.",
                        f"Point {alias!r} at a PostgreSQL database, or remove the route.")


def listen_alias(alias: str) -> str:
    """The alias whose connection LISTENs for the jobs database ``alias`` (``LISTEN_DATABASES``)."""
    return get_settings().LISTEN_DATABASES.get(alias, alias)


def check_listen_databases() -> None:
    """Raise ``X_CONFIG_INVALID`` for a ``LISTEN_DATABASES`` entry whose jobs alias holds no jobs, or
    whose LISTEN alias is missing from ``DATABASES`` or is not PostgreSQL."""
    jobs_aliases = aliases()
    for jobs_alias, target in get_settings().LISTEN_DATABASES.items():
        name = f"ULTIMATE_JOBS['LISTEN_DATABASES'][{jobs_alias!r}]"
        if jobs_alias not in jobs_aliases:
            raise JobsError(X_CONFIG_INVALID, f"{name}: {jobs_alias!r} is not a jobs database (DATABASE or an "
                            f"alias of QUEUE_DATABASES: {', '.join(jobs_aliases)}).",
                            "Key LISTEN_DATABASES by the jobs alias whose LISTEN moves, e.g. "
                            '{"default": "default_direct"}.')
        if target not in django_settings.DATABASES:
            raise JobsError(X_CONFIG_INVALID, f"{name}={target!r}, which is not in DATABASES.",
                            f"Add {target!r} to DATABASES: the same database as {jobs_alias!r}, reached directly "
                            "or through a session-mode pool.")
        vendor = connections[target].vendor
        if vendor != "postgresql" or connections[jobs_alias].vendor != "postgresql":
            raise JobsError(X_CONFIG_INVALID, f"{name}={target!r}: LISTEN needs PostgreSQL on both aliases, "
                            f"not {vendor}.", f"Remove the {jobs_alias!r} entry: SQLite polls.")


def single_alias(queues: Iterable[str], *, home: str | None = None) -> str:
    """The one alias holding every queue of ``queues``; raise ``X_CONFIG_INVALID`` when they span
    several (one claim loop speaks to one database: ``jobs_worker`` runs one loop per alias)."""
    groups = group_queues(queues, home=home)
    if len(groups) > 1:
        spread = "; ".join(f"{', '.join(qs)} on {alias!r}" for alias, qs in groups.items())
        raise JobsError(X_CONFIG_INVALID, f"The queues live on several databases ({spread}); one Worker claims "
                        "from one.", "Run jobs_worker (one claim loop per database in one process), or one "
                        "Worker(queues=..., database=alias) per database.")
    return next(iter(groups), home or get_settings().DATABASE)
