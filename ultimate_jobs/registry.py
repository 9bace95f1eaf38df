"""Internal: every declared job by name — what ``@job`` registers and workers, ops and the admin look up.

A name is a durable queue key, so two declarations on one name are refused (``X_JOB_DUPLICATE``)
unless they are the same body imported twice.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from ultimate_jobs.errors import X_JOB_DUPLICATE, JobsError

if TYPE_CHECKING:
    from ultimate_jobs.handle import AnyJobHandle

_registry: dict[str, AnyJobHandle] = {}
_registry_lock = threading.Lock()


def registered_jobs() -> list[AnyJobHandle]:
    """Every declared job, sorted by name in code-point order."""
    return [_registry[name] for name in sorted(_registry)]


def get_job_handle(name: str) -> AnyJobHandle | None:
    """The job declared in this process under ``name``, or None (public: ``ultimate_jobs.get_job_handle``)."""
    return _registry.get(name)


def register(handle: AnyJobHandle) -> None:
    with _registry_lock:
        existing = _registry.get(handle.name)
        if existing is not None and existing.source != handle.source:
            raise JobsError(X_JOB_DUPLICATE, f"Two jobs are declared on the name {handle.name!r} "
                            f"({existing.source} and {handle.source}).",
                            "Give one of them its own name= (a name is a durable queue key: keep it).")
        _registry[handle.name] = handle


def unregister(name: str) -> None:
    """Forget a declaration (a test's throwaway job; ``ultimate_jobs.testing`` uses it)."""
    with _registry_lock:
        _registry.pop(name, None)
