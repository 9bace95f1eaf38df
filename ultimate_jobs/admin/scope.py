"""Internal: which tenant's jobs an admin user may see — the ``ADMIN_TENANT_OF`` hook.

``ULTIMATE_JOBS["ADMIN_TENANT_OF"]`` names ``callable(request) -> tenant id or None``. A tenant id
scopes that request: the changelist, the job page, the actions and the overview show that
tenant's jobs only, and the fleet-wide pages (queues, workers, scheduled tasks, backfills, the
throughput charts) are refused, since their numbers add up every tenant. None (or no setting)
means every tenant. An unimportable path or a non-string answer is ``X_CONFIG_INVALID``.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils.module_loading import import_string

from ultimate_jobs.conf import get_settings
from ultimate_jobs.errors import X_CONFIG_INVALID, JobsError


def tenant_scope(request: HttpRequest) -> str | None:
    """The tenant this request is scoped to, or None for every tenant."""
    path = get_settings().ADMIN_TENANT_OF
    if path is None:
        return None
    try:
        resolver: Any = import_string(path)
    except ImportError as err:
        raise JobsError(X_CONFIG_INVALID, f"ULTIMATE_JOBS['ADMIN_TENANT_OF']={path!r} cannot be imported: {err}.",
                        "Name a callable(request) -> tenant id or None by its dotted path.") from None
    tenant = resolver(request)
    if tenant is not None and (not isinstance(tenant, str) or not tenant or "\x00" in tenant):
        raise JobsError(X_CONFIG_INVALID, f"ULTIMATE_JOBS['ADMIN_TENANT_OF'] answered {tenant!r} for "
                        f"{request.user.get_username()!r}; it must answer a tenant id (a non-empty string) "
                        "or None.", "Make the callable answer a tenant id string, or None for every tenant.")
    return tenant
