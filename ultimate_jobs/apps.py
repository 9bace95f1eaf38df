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
