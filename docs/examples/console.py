"""The console's numbers and ids (ultimate_jobs.ops): overview() — what the admin's overview page,
`jobs stats --json` and `jobs top` show — and ids typed by prefix or short form (resolve_job_id).

Run it: python docs/examples/console.py
"""

import atexit
import tempfile
from uuid import UUID

import django
from django.conf import settings

TMP = tempfile.TemporaryDirectory()
atexit.register(TMP.cleanup)
settings.configure(
    INSTALLED_APPS=["ultimate_jobs"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": f"{TMP.name}/jobs.sqlite3"}},
    USE_TZ=True,
)
django.setup()

from ultimate_jobs import NO_TENANT, JobsError, Retry, Worker, job  # noqa: E402


@job(name="shop.sync", idempotency_key="sync:{n}", tenant=NO_TENANT, queue="shop", retry=Retry(attempts=1))
def sync(ctx, *, n: int) -> None:
    if n == 3:
        raise ConnectionError("ERP timed out")


def main() -> None:
    from django.core.management import call_command
    from django.utils import timezone

    from ultimate_jobs import ops
    from ultimate_jobs.models import Job

    call_command("migrate", verbosity=0)
    for n in range(5):
        sync.enqueue(n=n)
    Worker(queues=["shop"], burst=True).run()
    sync.enqueue(n=10)  # waiting: the queue's depth

    view = ops.overview()
    shop = next(q for q in view["queues"] if q["queue"] == "shop")
    print("depth:", shop["depth"])
    print("last hour:", sum(shop["hour"]["done"]), "done,", sum(shop["hour"]["failed"]), "failed in",
          len(shop["hour"]["done"]), "one-minute buckets")
    print("last day:", sum(shop["day"]["done"]), "done in", len(shop["day"]["done"]), "buckets of",
          shop["day"]["width"], "s")
    print("dead in 24 h:", view["dead_last_day_count"], [d["error"].splitlines()[-1] for d in view["dead_last_day"]])

    # Two ids made in the same minute share their first characters; the short form tells them apart.
    twins = ["01a23171-458e-7000-8000-00000000aaaa", "01a23171-458e-7000-8000-00000000bbbb"]
    now = timezone.now()
    for job_id in twins:
        Job.objects.create(id=UUID(job_id), name="shop.sync", queue="shop", state="done", idempotency_key=job_id,
                           run_at=now, created_at=now, updated_at=now)
    print("short form:", ops.short_form(twins[1]))
    print("by short form:", ops.resolve_job_id("01a23171...bbbb"))
    print("by prefix:", ops.resolve_job_id("01a23171-458e-7000-8000-00000000a"))
    try:
        ops.resolve_job_id("01a23171")
    except JobsError as err:
        print("ambiguous:", err.code, len(ops.matching_job_ids("01a23171")), "matches")


if __name__ == "__main__":
    main()

# Output:
# depth: 1
# last hour: 4 done, 1 failed in 60 one-minute buckets
# last day: 4 done in 96 buckets of 900 s
# dead in 24 h: 1 ['ConnectionError: ERP timed out']
# short form: 01a23171…bbbb
# by short form: 01a23171-458e-7000-8000-00000000bbbb
# by prefix: 01a23171-458e-7000-8000-00000000aaaa
# ambiguous: X_ID_AMBIGUOUS 2 matches
