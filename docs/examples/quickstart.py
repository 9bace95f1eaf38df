"""Quickstart: declare a job, enqueue it twice (the second deduplicates), run a worker, read the job.

Run it: python docs/examples/quickstart.py  (a throwaway SQLite database; no project needed)
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
)
django.setup()

from ultimate_jobs import NO_TENANT, Worker, job  # noqa: E402


@job(name="shop.send_receipt", idempotency_key="receipt:{order_id}", tenant=NO_TENANT)
def send_receipt(ctx, *, order_id: int) -> dict:
    return {"order_id": order_id, "attempt": ctx.attempt}


def main() -> None:
    from django.core.management import call_command

    from ultimate_jobs import ops  # reads the models: import after django.setup()

    call_command("migrate", verbosity=0)

    first = send_receipt.enqueue(order_id=42)
    again = send_receipt.enqueue(order_id=42)
    print("first deduped:", first.deduped, "| second deduped:", again.deduped)
    print("same job:", again.id == first.id)

    stats = Worker(queues=["default"], burst=True).run()  # what `manage.py jobs_worker --burst` runs
    print("worker claimed:", stats["claimed"], "| settled:", stats["settled"])

    row = ops.get_job(first.id)
    print(row["name"], row["state"], f"attempt {row['attempt']}/{row['max_attempts']}", row["result"])


if __name__ == "__main__":
    main()

# Output:
# first deduped: False | second deduped: True
# same job: True
# worker claimed: 1 | settled: 1
# shop.send_receipt done attempt 1/3 {'order_id': 42, 'attempt': 1}
