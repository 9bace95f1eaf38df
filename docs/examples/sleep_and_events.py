"""step.sleep suspends a run without burning an attempt; step.wait_for_event waits for a
publish_event whose payload contains the match, or times out with None. Time here is the
ultimate_jobs.testing frozen clock, so "3 days" passes at once.

Run it: python docs/examples/sleep_and_events.py
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

from ultimate_jobs import NO_TENANT, Suspension, job, publish_event  # noqa: E402


@job(name="accounts.trial", idempotency_key="trial:{org}", tenant="{org}", retry=1)
def trial(ctx, *, org: str) -> str:
    ctx.step.run("welcome", lambda: f"welcomed {org}")
    try:
        ctx.step.sleep("3d")              # the worker is released; any worker resumes it later
    except Exception:                     # never reached: a Suspension is not an Exception
        return "swallowed"
    return ctx.step.run("nudge", lambda: f"nudged {org} on attempt {ctx.attempt}")


@job(name="billing.await_payment", idempotency_key="pay:{invoice}", tenant=NO_TENANT)
def await_payment(ctx, *, invoice: int) -> object:
    return ctx.step.wait_for_event("paid", "invoice.paid", match={"invoice": invoice}, timeout="7d")


def main() -> None:
    from django.core.management import call_command
    from django.db import transaction

    from ultimate_jobs.testing import drain, freeze_clock, run_job

    call_command("migrate", verbosity=0)
    print("Suspension is an Exception:", issubclass(Suspension, Exception))
    with freeze_clock() as clock:
        t = run_job(trial, org="acme")
        print("trial:", t.state, "| attempt:", t.attempt, "| wakes in:", t.run_at - clock.now())
        print("after 2 days:", drain(advance="2d"))
        (t,) = drain(advance="1d")
        print("after 3 days:", t.state, t.result, "| steps:", list(t.steps))

        w = run_job(await_payment, invoice=42)
        print("waiting:", w.state)
        try:
            with transaction.atomic():
                publish_event("invoice.paid", {"invoice": 42, "amount": 100})
                raise RuntimeError("the payment request failed")
        except RuntimeError:
            pass
        print("rolled-back publish woke:", drain())
        print("other invoice woke:", publish_event("invoice.paid", {"invoice": 41}))
        print("matching publish woke:", publish_event("invoice.paid", {"invoice": 42, "amount": 99}))
        (w,) = drain()
        print("paid:", w.state, w.result)

        w = run_job(await_payment, invoice=43)
        (w,) = drain(advance="7d")
        print("timed out:", w.state, w.result)
        print("late event woke:", publish_event("invoice.paid", {"invoice": 43}))


if __name__ == "__main__":
    main()

# Output:
# Suspension is an Exception: False
# trial: suspended | attempt: 0 | wakes in: 3 days, 0:00:00
# after 2 days: []
# after 3 days: done nudged acme on attempt 1 | steps: ['welcome', 'sleep:1', 'nudge']
# waiting: suspended
# rolled-back publish woke: []
# other invoice woke: 0
# matching publish woke: 1
# paid: done {'invoice': 42, 'amount': 99}
# timed out: done None
# late event woke: 0
