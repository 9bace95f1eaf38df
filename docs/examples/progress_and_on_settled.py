"""ctx.progress (one write a second, the last always written), ctx.final_attempt, and on_settled:
one hook for every ending -- completed, dead-lettered, dropped (dead_letter=False) or refused.

Run it: python docs/examples/progress_and_on_settled.py
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

from ultimate_jobs import NO_TENANT, Retry, Settled, job  # noqa: E402

HEARD = []


def report(settled: Settled) -> None:
    """Runs once the row settled, under the job's tenant; three tries inside on_settled_timeout."""
    HEARD.append(f"{settled.name}: {settled.outcome} input={settled.input} result={settled.result} "
                 f"code={settled.code}")


@job(name="sync.account", idempotency_key="sync:{account}", tenant="{org}", on_settled=report)
def sync_account(ctx, *, account: int, org: str) -> dict:
    rows = ctx.step.run("load", lambda: list(range(250)))
    for n, _row in enumerate(rows, 1):
        ctx.progress(n, len(rows), note=f"row {n}")
    return {"rows": len(rows)}


@job(name="sync.flaky", idempotency_key="flaky:{account}", tenant=NO_TENANT, on_settled=report,
     retry=Retry(attempts=2, delay=0))
def flaky(ctx, *, account: int) -> None:
    print(f"attempt {ctx.attempt}/{ctx.max_attempts} final={ctx.final_attempt}")
    raise ConnectionError("upstream down")


@job(name="sync.best_effort", idempotency_key="best:{account}", tenant=NO_TENANT, on_settled=report,
     retry=Retry(attempts=1, dead_letter=False))
def best_effort(ctx, *, account: int) -> None:
    raise ConnectionError("upstream down")


def main() -> None:
    from django.core.management import call_command

    from ultimate_jobs import ops
    from ultimate_jobs.testing import run_job

    call_command("migrate", verbosity=0)
    trace = run_job(sync_account, account=1, org="acme")
    print("progress:", ops.get_job(trace.id)["progress"])
    run_job(flaky, account=2)
    run_job(best_effort, account=3)
    print("\n".join(HEARD))


if __name__ == "__main__":
    main()

# Output:
# progress: {'done': 250, 'total': 250, 'note': 'row 250'}
# attempt 1/2 final=False
# attempt 2/2 final=True
# sync.account: completed input={'account': 1, 'org': 'acme'} result={'rows': 250} code=None
# sync.flaky: dead-lettered input={'account': 2} result=None code=X_JOB_FAILED
# sync.best_effort: dropped input={'account': 3} result=None code=X_JOB_FAILED
