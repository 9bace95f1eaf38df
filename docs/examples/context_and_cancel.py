"""Inside a run: the JobContext every body receives first, and cooperative cancellation through
ctx.cancelled (a CancelToken). A job's timeout sets the token, then fails the attempt.

Run it: python docs/examples/context_and_cancel.py
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

from ultimate_jobs import CancelToken, JobCancelled, JobContext, Retry, Worker, job  # noqa: E402

SEEN = []


@job(name="reports.build", idempotency_key="report:{report_id}", tenant="{org}", retry=4, queue="reports")
def build_report(ctx: JobContext, *, org: str, report_id: int) -> None:
    SEEN.append(f"{ctx.name} queue={ctx.queue} tenant={ctx.tenant_id} "
                f"attempt={ctx.attempt}/{ctx.max_attempts} final={ctx.final_attempt} "
                f"cancelled={ctx.cancelled.is_set()}")


@job(name="reports.slow", idempotency_key="slow:{n}", tenant="{org}", timeout="200ms",
     retry=Retry(attempts=1))
def slow_report(ctx: JobContext, *, org: str, n: int) -> None:
    for _ in range(100):
        if ctx.cancelled.wait(0.1):   # sleeps, but wakes at once when cancelled
            SEEN.append(f"slow saw {ctx.cancelled.reason}")
            ctx.cancelled.check()     # raises JobCancelled(code=ctx.cancelled.reason)


def main() -> None:
    from django.core.management import call_command

    from ultimate_jobs import ops

    token = CancelToken()
    print("fresh token:", token.is_set(), token.reason)
    token.set("X_ABORTED", "an operator cancelled it")
    try:
        token.check()
    except JobCancelled as err:
        print("check() raised:", err.code, "-", err.cause)
    print("first reason wins:", token.set("X_DRAINING"), token.reason)

    call_command("migrate", verbosity=0)
    build_report.enqueue(org="acme", report_id=1)
    slow = slow_report.enqueue(org="acme", n=1)
    Worker(queues=["reports", "default"], burst=True).run()
    print("\n".join(SEEN))
    row = ops.get_job(slow.id)
    print("slow:", row["state"], row["error_code"], row["stop_reason"])


if __name__ == "__main__":
    main()

# Output:
# fresh token: False None
# check() raised: X_ABORTED - an operator cancelled it
# first reason wins: False X_ABORTED
# reports.build queue=reports tenant=acme attempt=1/4 final=False cancelled=False
# slow saw X_JOB_TIMEOUT
# slow: dead X_JOB_TIMEOUT attempts-exhausted
