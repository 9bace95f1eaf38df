"""Internal: what the backend and the worker agree on about a task — the job name every Django
task runs as, how a task is found by module path, and which retry policy it runs under."""

from __future__ import annotations

import sys
from typing import Any

from django.apps import apps
from django.core import signing
from django.core.exceptions import ImproperlyConfigured, SuspiciousOperation
from django.utils.module_loading import import_string

from ultimate_jobs.errors import X_TASK_PATH_REFUSED, Terminal
from ultimate_jobs.names import TASK_JOB as TASK_JOB  # defined below the operator API, which reads it too
from ultimate_jobs.retry import Retry

_SALT = "ultimate_jobs.contrib.tasks.task_path"

RETRY_ATTRIBUTE = "_ultimate_jobs_retry"
NO_RETRY = Retry(attempts=1)


def sign_path(path: str) -> str | None:
    """The signature the backend stores beside a task's module path (``task_sig``): keyed by
    ``SECRET_KEY``, so only a process of this project could have written it (None without a
    ``SECRET_KEY``: the worker then imports only modules of installed apps or imported already)."""
    try:
        return signing.Signer(salt=_SALT).sign(path).rsplit(":", 1)[1]
    except ImproperlyConfigured:
        return None


def load_task(path: str, signature: str | None = None) -> Any:
    """The ``Task`` a module path names (the decorated function's module binding).

    A row is data: nothing it names is imported unless the module is already imported, lies in
    an installed app's package, or the path carries the backend's signature (``sign_path``; a row
    written by hand has none). Anything else is ``X_TASK_PATH_REFUSED``, terminal, nothing
    imported (SPEC §12, issue 25). A path that names something other than a ``Task`` (a row
    written by hand: ``subprocess.check_output``) is refused, never called."""
    from ultimate_jobs.contrib.tasks.framework import Task

    module, _, attribute = path.rpartition(".") if isinstance(path, str) else ("", "", "")
    if not module or not attribute or not _may_import(module, path, signature):
        raise Terminal(f"The django_tasks row names {str(path)[:200]!r}, which is not a task of this project "
                       "(its module is not imported, not in an installed app, and the path is not signed by "
                       "the backend): nothing was imported.", code=X_TASK_PATH_REFUSED)
    try:
        found = import_string(path)
    except ImportError as exc:
        raise Terminal(f"The django_tasks row names {path[:200]!r}, which cannot be imported: {exc}.",
                       code=X_TASK_PATH_REFUSED) from None
    if not isinstance(found, Task):
        raise SuspiciousOperation(f"{path!r} does not point to a Task.")
    return found


def _may_import(module: str, path: str, signature: str | None) -> bool:
    if module in sys.modules:
        return True
    if any(module == app.name or module.startswith(app.name + ".") for app in apps.get_app_configs()):
        return True
    if not isinstance(signature, str):
        return False
    try:
        return signing.Signer(salt=_SALT).unsign(f"{path}:{signature}") == path  # SECRET_KEY_FALLBACKS too
    except (signing.BadSignature, ImproperlyConfigured):
        return False


def retry_for(task: Any, backend: Any) -> Retry:
    """The policy of ``task``: its own ``retry(...)``, else the backend's ``OPTIONS["retry"]``, else none."""
    own = getattr(task.func, RETRY_ATTRIBUTE, None)
    if own is not None:
        return own  # type: ignore[no-any-return,unused-ignore]
    return getattr(backend, "retry", None) or NO_RETRY
