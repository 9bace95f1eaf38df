"""Retries: a Retry policy, its schedule, and a job that fails twice then succeeds.

Run it: python docs/examples/retries.py
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

from ultimate_jobs import NO_TENANT, Retry, Worker, job, retry_schedule  # noqa: E402


# delay=0 so this example's retries are runnable at once; real jobs keep a backoff.
@job(name="gateway.charge", idempotency_key="charge:{order_id}", tenant=NO_TENANT,
     retry=Retry(attempts=3, backoff="fixed", delay=0, jitter=False))
def charge(ctx, *, order_id: int) -> dict:
    if ctx.attempt < 3:
        raise ConnectionError(f"gateway timed out (attempt {ctx.attempt} of {ctx.max_attempts})")
    return {"charged": order_id, "final_attempt": ctx.final_attempt}


def main() -> None:
    from django.core.management import call_command

    from ultimate_jobs import ops

    print("default:")
    print(Retry())
    print("exponential:", retry_schedule(Retry(attempts=5, delay="1s")))
    print("linear:", retry_schedule(Retry(attempts=4, backoff="linear", delay="10s")))
    print("capped:", retry_schedule(Retry(attempts=4, delay="1m", max_delay="90s")))
    print("retry=3 means:", retry_schedule(3))
    # jitter=True (the default) waits between half and all of each step: *equal* jitter.
    print("one jittered wait within [0.5, 1.0]:", 0.5 <= Retry(delay="1s").delay_after(1) <= 1.0)

    call_command("migrate", verbosity=0)
    result = charge.enqueue(order_id=7)
    Worker(queues=["default"], burst=True).run()
    row = ops.get_job(result.id)
    print(row["state"], f"after {row['attempt']} attempts:", row["result"])
    print("current error:", row["last_error"], "| code:", row["error_code"])  # done: none
    failed = [a for a in row["attempts"] if a["outcome"] == "retried"]
    print("earlier failures:", [a["error"].splitlines()[-1] for a in failed], "| codes:",
          [a["error_code"] for a in failed])


if __name__ == "__main__":
    main()

# Output:
# default:
# Retry(attempts=3, backoff='exponential', delay=1.0, max_delay=3600.0, jitter=True, dead_letter=True)
# exponential: [1.0, 2.0, 4.0, 8.0]
# linear: [10.0, 20.0, 30.0]
# capped: [60.0, 90.0, 90.0]
# retry=3 means: [1.0, 2.0]
# one jittered wait within [0.5, 1.0]: True
# done after 3 attempts: {'charged': 7, 'final_attempt': True}
# current error: None | code: None
# earlier failures: ['ConnectionError: gateway timed out (attempt 1 of 3)', 'ConnectionError: gateway timed out (attempt 2 of 3)'] | codes: ['X_JOB_FAILED', 'X_JOB_FAILED']
