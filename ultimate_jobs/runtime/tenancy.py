"""Internal: the tenant context entered around every body and ``on_settled``: the run's tenant
made the default of ``publish_event``, and the ``TENANT_CONTEXT`` setting's context manager.

The factory is resolved, called and entered inside the attempt's error handling
(``runtime.execute``): a factory that cannot be imported, that raises, or whose context manager
raises on enter or on exit fails the attempt with its error stored (redacted), through the
ordinary retry and dead-letter path, never a run stranded ``running`` until its lease lapses.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from django.utils.module_loading import import_string

from ultimate_jobs.conf import get_settings
from ultimate_jobs.events import acting_as


@contextlib.contextmanager
def tenant_context(tenant_id: str | None) -> Iterator[None]:
    """Act as ``tenant_id`` inside the block, under the ``TENANT_CONTEXT`` factory's context manager if one is set."""
    with acting_as(tenant_id):
        factory_path = get_settings().TENANT_CONTEXT
        if not factory_path:
            yield
            return
        factory: Callable[[str | None], contextlib.AbstractContextManager[Any]] = import_string(factory_path)
        with factory(tenant_id):
            yield
