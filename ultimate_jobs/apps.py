"""Internal: the Django app config; ``ready()`` discovers every installed app's ``jobs`` module and
installs the redacting filter on the ``ultimate_jobs`` logger."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules


class UltimateJobsConfig(AppConfig):
    name = "ultimate_jobs"
    verbose_name = "Jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        import logging

        from ultimate_jobs import checks  # noqa: F401  (registers the system checks)
        from ultimate_jobs.redact import RedactingFilter

        logger = logging.getLogger("ultimate_jobs")
        if not any(isinstance(f, RedactingFilter) for f in logger.filters):
            logger.addFilter(RedactingFilter())  # every surface is redacted, logs included
        autodiscover_modules("jobs")
