from django.apps import AppConfig


class TestAppConfig(AppConfig):
    name = "tests.app"
    label = "testapp"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import async_step_jobs, data_jobs, step_jobs  # noqa: F401  (jobs declared in every process)
