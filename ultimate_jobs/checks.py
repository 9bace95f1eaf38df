"""Internal: system checks, so ``manage.py check`` names a bad setting before the first tick.

Ids: ``ultimate_jobs.E001`` a bad ``ULTIMATE_JOBS`` value; ``ultimate_jobs.E002`` a
``DATABASE`` alias missing from ``DATABASES``; ``ultimate_jobs.E003`` a backfill whose ``requires``
names a migration no installed app has; ``ultimate_jobs.E012`` a ``QUEUE_DATABASES`` route to an
alias missing from ``DATABASES`` or not PostgreSQL; ``ultimate_jobs.W001`` a ``REDACT_KEYS`` that drops
some of the default secret keys (``REDACT_KEYS_EXTRA`` adds keys without dropping any);
``ultimate_jobs.E020`` a ``TENANT_OF``, ``TENANT_CONTEXT`` or ``ADMIN_TENANT_OF`` path that does not
import or names nothing callable; ``ultimate_jobs.W020`` a ``webhook()`` declared while httpx, which
sends it, is not installed; ``ultimate_jobs.W010`` a subject job acting for a tenant over a subject that
declares no ``tenant``. Ids are never reused.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks
from django.db import DatabaseError
from django.db.migrations.loader import MigrationLoader
from django.utils.module_loading import import_string

from ultimate_jobs.conf import DEFAULT_REDACT_KEYS, get_settings
from ultimate_jobs.db.routing import check_listen_databases, check_routes
from ultimate_jobs.errors import CODES, X_JOB_REFRESH_VIEW_INVALID, X_WEBHOOK_HTTPX_MISSING, JobsError
from ultimate_jobs.factories.backfill.declaration import registered_backfills
from ultimate_jobs.factories.refresh_view import registered_views, view_problem
from ultimate_jobs.factories.subject.declaration import registered_subjects, subject_jobs
from ultimate_jobs.factories.webhook.declaration import get_webhook
from ultimate_jobs.inputs import NO_TENANT
from ultimate_jobs.registry import registered_jobs

TENANT_HOOKS = ("TENANT_OF", "TENANT_CONTEXT", "ADMIN_TENANT_OF")


@checks.register()
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    get_settings.cache_clear()
    try:
        jobs_settings = get_settings()
    except JobsError as err:
        return [checks.Error(err.cause, hint=err.fix, id="ultimate_jobs.E001")]
    if jobs_settings.DATABASE not in settings.DATABASES:
        return [checks.Error(f"ULTIMATE_JOBS['DATABASE']={jobs_settings.DATABASE!r} is not in DATABASES.",
                             hint="Name an alias from DATABASES, or leave DATABASE unset for 'default'.",
                             id="ultimate_jobs.E002")]
    try:
        check_routes()
    except JobsError as err:
        return [checks.Error(err.cause, hint=err.fix, id="ultimate_jobs.E012")]
    try:
        check_listen_databases()
    except JobsError as err:
        return [checks.Error(err.cause, hint=err.fix, id="ultimate_jobs.E013")]
    dropped = [k for k in DEFAULT_REDACT_KEYS if k not in jobs_settings.REDACT_KEYS]
    if dropped:
        return [checks.Warning(f"ULTIMATE_JOBS['REDACT_KEYS'] replaces the defaults and drops {', '.join(dropped)}: "
                               "values under those keys reach the admin, the CLI, logs and traces unmasked.",
                               hint="Remove REDACT_KEYS and list your own keys in REDACT_KEYS_EXTRA, which adds to the "
                               "defaults.", id="ultimate_jobs.W001")]
    return []


@checks.register()
def check_tenant_hooks(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``ultimate_jobs.E020``: a tenant hook that would fail only later — ``TENANT_OF`` at the
    first enqueue by a user, ``TENANT_CONTEXT`` as every job dead-lettering, ``ADMIN_TENANT_OF`` as
    every admin page refused."""
    try:
        jobs_settings = get_settings()
    except JobsError:
        return []  # ultimate_jobs.E001 names the bad value
    found: list[checks.CheckMessage] = []
    for key in TENANT_HOOKS:
        path = getattr(jobs_settings, key)
        if not path:
            continue
        problem: str | None
        try:
            hook = import_string(path)
        except Exception as exc:  # noqa: BLE001 (an import error, or the module's own failure)
            problem = f"cannot be imported: {exc}"
        else:
            problem = None if callable(hook) else f"names {type(hook).__name__} {hook!r:.60}, which is not callable"
        if problem is not None:
            found.append(checks.Error(f"ULTIMATE_JOBS[{key!r}]={path!r} {problem}.",
                                      hint=f"Point {key} at a function of your project as a dotted path "
                                      '("myapp.tenancy.tenant_of"), or remove it.', id="ultimate_jobs.E020"))
    return found


@checks.register()
def check_webhook_transport(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``ultimate_jobs.W020``: a ``webhook()`` is declared and httpx, which sends it, is missing;
    without this the first delivery would fail ``X_WEBHOOK_HTTPX_MISSING`` and dead-letter."""
    declared = [handle.name for handle in registered_jobs() if get_webhook(handle) is not None]
    if not declared:
        return []
    try:
        import httpx  # noqa: F401 (optional: the webhooks extra)
    except ImportError:
        return [checks.Warning(f"webhook() {', '.join(declared)} is declared but httpx is not installed: every "
                               f"delivery would fail {X_WEBHOOK_HTTPX_MISSING} and dead-letter.",
                               hint=CODES[X_WEBHOOK_HTTPX_MISSING], id="ultimate_jobs.W020")]
    return []


@checks.register(checks.Tags.models)
def check_backfill_requires(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """A ``requires`` with a typo would hold its backfill back forever, as "migration pending"."""
    wanted = [(b.name, b.requires) for b in registered_backfills() if b.requires is not None]
    if not wanted:
        return []
    on_disk = MigrationLoader(None, ignore_no_migrations=True).disk_migrations
    return [checks.Error(f"backfill {name!r} requires={requires!r}, but no installed app has that migration.",
                         hint='Name an existing migration as "app_label.migration_name" (see showmigrations).',
                         id="ultimate_jobs.E003")
            for name, requires in wanted if tuple(requires.split(".", 1)) not in on_disk]


@checks.register(checks.Tags.models)
def check_subjects(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``ultimate_jobs.E010``: a ``define_subject`` whose reach holds a model with no treatment
    (``X_SUBJECT_TABLE_UNDECLARED``), or whose declaration is refused once the registry is ready."""
    found: list[checks.CheckMessage] = []
    for subject in registered_subjects():
        try:
            subject.refuse_undeclared()
        except JobsError as err:
            found.append(checks.Error(f"[{err.code}] {err.cause}", hint=err.fix, obj=subject.model,
                                      id="ultimate_jobs.E010"))
    return found


@checks.register(checks.Tags.models)
def check_subject_tenants(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``ultimate_jobs.W010``: a ``subject_erase``/``subject_export`` acting for a tenant over a
    ``define_subject`` that declares none: the tenant is only a label, so a job enqueued for one org
    would erase or export another org's person."""
    live = {id(handle) for handle in registered_jobs()}
    return [checks.Warning(f"{handle.name} acts for a tenant but its subject {subject.model._meta.label} declares "
                           "none: a job enqueued for one tenant would erase or export another tenant's person.",
                           hint='Pass define_subject(..., tenant="<the subject\'s tenant field>"), e.g. "org_id".',
                           obj=subject.model, id="ultimate_jobs.W010")
            for handle, subject in subject_jobs()
            if handle.tenant is not NO_TENANT and subject.tenant is None and id(handle) in live]


@checks.register()
def check_refresh_views(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``ultimate_jobs.E011``: a ``refresh_view`` whose relation is not a materialized view, or
    ``concurrently`` without a unique index; ``ultimate_jobs.W011`` when the relation does not exist
    yet (a pending migration may create it, so ``migrate`` is not blocked). Reads the catalog; an
    unreachable database is left to the first run."""
    found: list[checks.CheckMessage] = []
    for declared in registered_views():
        if databases is not None and declared.database not in databases:
            continue
        try:
            problem, qualified = view_problem(declared)
        except (DatabaseError, JobsError):
            continue
        if problem is not None:
            level = checks.Warning if qualified is None else checks.Error
            found.append(level(f"[{X_JOB_REFRESH_VIEW_INVALID}] {problem}", hint=CODES[X_JOB_REFRESH_VIEW_INVALID],
                               id="ultimate_jobs.W011" if qualified is None else "ultimate_jobs.E011"))
    return found
