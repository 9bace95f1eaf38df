"""Django's Tasks framework on ultimate_jobs: every @task a durable job, run by jobs_worker.

Run it: python docs/examples/using_django_tasks.py
"""

import atexit
import tempfile

import django
from django.conf import settings

TMP = tempfile.TemporaryDirectory()
atexit.register(TMP.cleanup)
settings.configure(
    INSTALLED_APPS=["ultimate_jobs"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": f"{TMP.name}/jobs.sqlite3"}},
    USE_TZ=True,
    TASKS={"default": {"BACKEND": "ultimate_jobs.contrib.tasks.UltimateJobsBackend",
                       "QUEUES": ["default", "emails"]}},
)
django.setup()

try:
    from django.tasks import task  # Django 6
except ImportError:
    from django_tasks import task  # Django 5.2 with the backport: pip install ultimate-jobs[tasks]

from ultimate_jobs.contrib.tasks import job_context, retry  # noqa: E402

FETCHES = []


@task(queue_name="emails", priority=10)
def send_welcome(user_id: int, *, plan: str) -> str:
    return f"welcome mail for user {user_id} ({plan})"


@task(takes_context=True)
@retry(attempts=3, delay=0, jitter=False)
def import_feed(context, url: str) -> int:
    ctx = job_context(context)  # the run's JobContext: durable steps, progress, the cancel token
    rows = ctx.step.run("fetch", lambda: FETCHES.append(url) or [1, 2, 3])  # checkpointed
    if context.attempt == 1:
        raise ConnectionError("the feed timed out after the fetch")
    return len(rows)


def main() -> None:
    from django.core.management import call_command
    from django.db import transaction

    from ultimate_jobs import Worker, ops
    from ultimate_jobs.outbox import Relay

    call_command("migrate", verbosity=0)

    mail = send_welcome.enqueue(42, plan="pro")
    print("enqueued:", mail.status, "| job:", ops.get_job(mail.id)["name"], ops.get_job(mail.id)["queue"])

    try:
        with transaction.atomic():  # staged in the outbox: a rollback means it never existed
            send_welcome.enqueue(43, plan="free")
            raise RuntimeError("signup failed")
    except RuntimeError:
        pass
    with transaction.atomic():
        feed = import_feed.enqueue("https://example.com/feed.json")
    print("published by the relay:", Relay().drain())

    Worker(queues=["default", "emails"], burst=True).run(install_signals=False)  # python manage.py jobs_worker

    mail.refresh()
    print("mail:", mail.status, "|", mail.return_value)
    feed.refresh()
    print("feed:", feed.status, "|", feed.return_value, "| attempts:", feed.attempts,
          "| errors:", [e.exception_class_path for e in feed.errors], "| fetched:", len(FETCHES))


if __name__ == "__main__":
    main()

# Output:
# enqueued: READY | job: django_tasks emails
# published by the relay: 1
# mail: SUCCESSFUL | welcome mail for user 42 (pro)
# feed: SUCCESSFUL | 3 | attempts: 2 | errors: ['builtins.ConnectionError'] | fetched: 1
