"""Internal: the Django app config; ``ready()`` discovers every installed app's ``jobs`` module."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules


class UltimateJobsConfig(AppConfig):
    name = "ultimate_jobs"
    verbose_name = "Jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)

        autodiscover_modules("jobs")
