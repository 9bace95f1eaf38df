"""The programmatic Worker: what manage.py jobs_worker runs. run_once() is one claim pass and
answers the runs it started; run() loops until stopped, or with burst=True until idle.

Run it: python docs/examples/worker.py
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

from ultimate_jobs import NO_TENANT, JobsError, Worker, job  # noqa: E402


@job(name="img.thumbnail", idempotency_key="thumb:{image_id}", tenant=NO_TENANT, queue="images")
def thumbnail(ctx, *, image_id: int) -> str:
    return f"thumb-{image_id}.webp"


@job(name="mail.welcome", idempotency_key="welcome:{user_id}", tenant=NO_TENANT, queue="mail")
def welcome(ctx, *, user_id: int) -> None:
    pass


def main() -> None:
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    thumbnail.enqueue_many([{"image_id": n} for n in range(5)])
    welcome.enqueue_many([{"user_id": n} for n in range(3)])

    worker = Worker(queues=["images", "mail"], concurrency="images=2,mail=1", burst=True)
    started = worker.run_once()  # one pass: claims up to each queue's free slots
    print("first pass started:", sorted(run.claimed.queue for run in started))
    stats = worker.run()  # burst: runs until nothing is runnable and nothing is in flight
    print("claimed:", stats["claimed"], "| settled:", stats["settled"],
          "| interrupted:", stats["interrupted"], "| lost:", stats["lost"], "| state:", worker.state)

    capped = Worker(queues=["images", "mail"], concurrency=8, max_in_flight=3)
    print("capacity with max_in_flight:", capped.capacity)
    for bad in ({"queues": []}, {"queues": ["images"], "concurrency": 0}, {"queues": ["Images!"]}):
        try:
            Worker(**bad)
        except JobsError as err:
            print("refused:", bad, err.code)


if __name__ == "__main__":
    main()

# Output:
# first pass started: ['images', 'images', 'mail']
# claimed: 8 | settled: 8 | interrupted: 0 | lost: 0 | state: stopped
# capacity with max_in_flight: 3
# refused: {'queues': []} X_JOB_CLAIM_QUEUES_EMPTY
# refused: {'queues': ['images'], 'concurrency': 0} X_CONFIG_INVALID
# refused: {'queues': ['Images!']} X_CONFIG_INVALID
