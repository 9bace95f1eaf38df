from django.apps import AppConfig


class TestAppConfig(AppConfig):
    name = "tests.app"
    label = "testapp"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import step_jobs  # noqa: F401  (durable-run jobs, declared in every process)
