"""QUEUE_DATABASES: route a queue's jobs to another database alias (a PostgreSQL of its own).

This script runs on SQLite, so it shows what the system check refuses: a route to an alias that
is not in DATABASES, and one that is not PostgreSQL. With a second PostgreSQL in DATABASES the
same settings pass the check, `manage.py migrate --database jobs_emails` creates the tables there,
and `jobs_worker --queues default,emails` claims from both databases in one process.

Run it: python docs/examples/queue_databases.py
"""

import atexit
import tempfile

import django
from django.conf import settings

TMP = tempfile.TemporaryDirectory()
atexit.register(TMP.cleanup)
settings.configure(
    INSTALLED_APPS=["ultimate_jobs"],
    DATABASES={
        "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": f"{TMP.name}/app.sqlite3"},
        "jobs_emails": {"ENGINE": "django.db.backends.sqlite3", "NAME": f"{TMP.name}/emails.sqlite3"},
    },
    USE_TZ=True,
    ULTIMATE_JOBS={"QUEUES": ["default", "emails"], "QUEUE_DATABASES": {"emails": "jobs_emails"}},
)
django.setup()


def main() -> None:
    from django.core import checks
    from django.test import override_settings

    for routes in ({"emails": "jobs_emails"}, {"emails": "jobs_nowhere"}):
        with override_settings(ULTIMATE_JOBS={"QUEUE_DATABASES": routes}):
            for error in checks.run_checks():
                if error.id.startswith("ultimate_jobs."):
                    print(f"{error.id}: {error.msg}")
                    print(f"  fix: {error.hint}")


main()

# Output:
# ultimate_jobs.E012: ULTIMATE_JOBS['QUEUE_DATABASES'] routes queue 'emails' to 'jobs_emails', which is sqlite; a routed queue needs its own PostgreSQL.
#   fix: Point 'jobs_emails' at a PostgreSQL database, or remove the route.
# ultimate_jobs.E012: ULTIMATE_JOBS['QUEUE_DATABASES'] routes queue 'emails' to 'jobs_nowhere', which is not in DATABASES.
#   fix: Add 'jobs_nowhere' to DATABASES (then manage.py migrate --database jobs_nowhere), or remove the route.
