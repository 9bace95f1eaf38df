"""Internal: the ``TENANT_CONTEXT`` setting's context manager, entered around every body and ``on_settled``."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from django.utils.module_loading import import_string

from ultimate_jobs.conf import get_settings


def tenant_context(tenant_id: str | None) -> contextlib.AbstractContextManager[Any]:
    """The ``TENANT_CONTEXT`` factory's context manager for this tenant, or a no-op."""
    factory_path = get_settings().TENANT_CONTEXT
    if not factory_path:
        return contextlib.nullcontext()
    factory: Callable[[str | None], contextlib.AbstractContextManager[Any]] = import_string(factory_path)
    return factory(tenant_id)
