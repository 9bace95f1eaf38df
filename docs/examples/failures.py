"""When a job fails: Terminal stops at once, register_error_retry classifies your own codes,
RetryAfter asks for a delay, and a job out of attempts is dead-lettered with its error kept.

Run it: python docs/examples/failures.py
"""

import atexit
import tempfile
import textwrap

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

from ultimate_jobs import NO_TENANT, JobsError, Retry, RetryAfter, Terminal, Worker, job, register_error_retry  # noqa: E402


class CardDeclined(Exception):
    code = "X_CARD_DECLINED"  # the attribute register_error_retry reads


register_error_retry({"X_CARD_DECLINED": "terminal"})
NOW = Retry(attempts=3, backoff="fixed", delay=0, jitter=False)


@job(name="pay.capture", idempotency_key="{key}", tenant=NO_TENANT, retry=NOW)
def capture(ctx, *, key: str, how: str) -> None:
    if how == "terminal":
        raise Terminal("the order was refunded already")
    if how == "classified":
        raise CardDeclined("card ending 4242 declined")
    if how == "retry-after":
        raise RetryAfter(120, "the provider answered 429")
    raise RuntimeError(f"boom on attempt {ctx.attempt}")


def main() -> None:
    from django.core.management import call_command

    from ultimate_jobs import ops

    call_command("migrate", verbosity=0)
    hows = ("terminal", "classified", "retry-after", "boom")
    results = {how: capture.enqueue(key=how, how=how) for how in hows}
    Worker(queues=["default"], burst=True).run()
    for how, result in results.items():
        row = ops.get_job(result.id)
        print(f"{how}: {row['state']} attempt={row['attempt']} stop_reason={row['stop_reason']} "
              f"code={row['error_code']} next_retry={'yes' if row['next_retry_at'] else 'no'}")
    print("terminal note:", ops.get_job(results["terminal"].id)["last_error"].splitlines()[-1])

    err = JobsError("X_JOB_NOT_FOUND", "No job has the id 0190a3c2-0000-7000-8000-000000000000.")
    print("code:", err.code)
    print("cause:", err.cause)
    print("fix:", err.fix)
    print("str(err):")
    print(textwrap.fill(str(err), 96, initial_indent="  ", subsequent_indent="  "))


if __name__ == "__main__":
    main()

# Output:
# terminal: dead attempt=1 stop_reason=terminal code=X_TERMINAL next_retry=no
# classified: dead attempt=1 stop_reason=terminal code=X_CARD_DECLINED next_retry=no
# retry-after: delayed attempt=1 stop_reason=None code=X_RETRY_AFTER next_retry=yes
# boom: dead attempt=3 stop_reason=attempts-exhausted code=X_JOB_FAILED next_retry=no
# terminal note: (not retried: this code is classified terminal)
# code: X_JOB_NOT_FOUND
# cause: No job has the id 0190a3c2-0000-7000-8000-000000000000.
# fix: Check the id; finished jobs are purged after their retention.
# str(err):
#   [X_JOB_NOT_FOUND] No job has the id 0190a3c2-0000-7000-8000-000000000000. Fix: Check the id;
#   finished jobs are purged after their retention.
