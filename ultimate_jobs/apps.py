"""Internal: the Django app config; ``ready()`` discovers every installed app's ``jobs`` module and
installs the redacting filter on the ``ultimate_jobs`` logger."""

from __future__ import annotations

import logging

from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules

from ultimate_jobs.redact import RedactingFilter


class UltimateJobsConfig(AppConfig):
    name = "ultimate_jobs"
    verbose_name = "Jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Here, not at the top: the checks read the backfill declarations, which import the models.
        from ultimate_jobs import checks  # noqa: F401  (registers the system checks)

        logger = logging.getLogger("ultimate_jobs")
        if not any(isinstance(f, RedactingFilter) for f in logger.filters):
            logger.addFilter(RedactingFilter())  # every surface is redacted, logs included
        autodiscover_modules("jobs")
        _declare_task_job()


def _declare_task_job() -> None:
    """Declare the job Django tasks run as when ``TASKS`` names the backend, so every worker claims
    them (``contrib/tasks/runner.py``; it imports no Tasks framework)."""
    from django.conf import settings

    backends = getattr(settings, "TASKS", None) or {}
    if any(str(b.get("BACKEND", "")).startswith("ultimate_jobs.contrib.tasks") for b in backends.values()):
        from ultimate_jobs.contrib.tasks import runner  # noqa: F401  (declares the django_tasks job)
