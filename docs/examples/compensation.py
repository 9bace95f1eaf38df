"""Compensation: charge, reserve, ship; a ship that fails for good releases the reservation, then
refunds the charge (last in, first out) -- only once the retries are spent, never on a retry.

Run it: python docs/examples/compensation.py
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

from ultimate_jobs import NO_TENANT, Retry, Worker, job  # noqa: E402

LOG = []


def charge(order: int) -> dict:
    LOG.append("charge")
    return {"id": f"ch_{order}"}


def reserve(order: int) -> dict:
    LOG.append("reserve")
    return {"id": f"rs_{order}"}


def ship(order: int, attempt: int) -> None:
    LOG.append(f"ship (attempt {attempt})")
    raise RuntimeError("the carrier refused the parcel")


@job(name="shop.checkout", idempotency_key="checkout:{order}", tenant=NO_TENANT, compensates=True,
     retry=Retry(attempts=3, backoff="fixed", delay=0, jitter=False))
def checkout(ctx, *, order: int) -> None:
    ctx.step.run("charge", lambda: charge(order), compensate=lambda c: LOG.append(f"refund {c['id']}"))
    ctx.step.run("reserve", lambda: reserve(order), compensate=lambda r: LOG.append(f"release {r['id']}"))
    ctx.step.run("ship", lambda: ship(order, ctx.attempt))


def main() -> None:
    from django.core.management import call_command

    from ultimate_jobs import ops

    call_command("migrate", verbosity=0)
    result = checkout.enqueue(order=7)
    Worker(queues=["default"], burst=True).run()
    job = ops.get_job(result.id)
    print("\n".join(LOG))
    print(job["state"], job["stop_reason"], "| max_attempts:", job["max_attempts"], "(3 + 2 for the unwind)")
    print("error:", job["last_error"].splitlines()[-1])
    print("steps:", ", ".join(f"{s['name']}={s['status']}" for s in job["steps"]))


if __name__ == "__main__":
    main()

# Output:
# charge
# reserve
# ship (attempt 1)
# ship (attempt 2)
# ship (attempt 3)
# release rs_7
# refund ch_7
# dead attempts-exhausted | max_attempts: 5 (3 + 2 for the unwind)
# error: RuntimeError: the carrier refused the parcel
# steps: charge=completed, reserve=completed, ship=failed, unwinding=completed, compensate:reserve=completed, compensate:charge=completed
