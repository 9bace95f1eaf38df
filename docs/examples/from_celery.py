"""From Celery: the same jobs written for ultimate_jobs, each line beside the Celery call it replaces.

Run it: python docs/examples/from_celery.py  (the page: docs/migrating-from-celery.md)
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

from ultimate_jobs import NO_TENANT, Retry, RetryAfter, Terminal, Worker, job, task  # noqa: E402

GATEWAY_CALLS: list[int] = []


# @app.task(autoretry_for=(ConnectionError,), retry_backoff=True, max_retries=4, acks_late=True)
# -> every exception retries on the job's Retry policy; a lease stands in for acks_late.
@job(name="billing.charge", idempotency_key="charge:{order_id}", tenant=NO_TENANT, queue="billing",
     retry=Retry(attempts=5, backoff="exponential", delay=0, jitter=False))
def charge(ctx, *, order_id: int, amount: int) -> dict:
    GATEWAY_CALLS.append(order_id)
    if amount <= 0:
        raise Terminal(f"amount {amount} cannot be charged")  # Celery: raise Reject / give up by hand
    if ctx.attempt == 1:
        raise RetryAfter(0, "gateway said 429")  # Celery: raise self.retry(countdown=...)
    return {"order_id": order_id, "charged": amount, "attempt": ctx.attempt}


# chain(reserve.s(order_id), ship.s()) -> one job whose steps each run once and are checkpointed.
@job(name="shop.fulfil", idempotency_key="fulfil:{order_id}", tenant=NO_TENANT)
def fulfil(ctx, *, order_id: int) -> str:
    slot = ctx.step.run("reserve", lambda: f"shelf-{order_id % 7}")
    label = ctx.step.run("ship", lambda: f"label for {order_id} from {slot}")
    return label


# app.conf.beat_schedule = {"nightly": {"task": "...", "schedule": crontab(hour=2, minute=30)}}
nightly = task(name="nightly-fulfil-sweep", cron="30 2 * * *", tz="Europe/Berlin", job=fulfil,
               input={"order_id": 0})


def main() -> None:
    from django.core.management import call_command
    from django.db import transaction

    from ultimate_jobs import ops
    from ultimate_jobs.outbox import Relay

    call_command("migrate", verbosity=0)

    # charge.delay(order_id=1, amount=500)
    first = charge.enqueue(order_id=1, amount=500)
    # charge.apply_async(kwargs=..., countdown=0, queue="billing", priority=...) -> using(...)
    again = charge.using(delay="0s", priority=5).enqueue(order_id=1, amount=999)
    print("a second enqueue of a live key is the same job:", again.id == first.id, again.deduped)

    # transaction.on_commit(lambda: charge.delay(...)) -> enqueue inside atomic(): staged with the write
    with transaction.atomic():
        staged = charge.enqueue(order_id=2, amount=0)
    print("inside atomic(): staged =", staged.staged)
    Relay().drain()  # `jobs_relay`, or the relay role every jobs_worker runs

    flow = fulfil.enqueue(order_id=10)
    Worker(queues=["default", "billing"], burst=True).run()

    # AsyncResult(id).get() -> ops.get_job(id): the row, its state, result, attempts and steps
    done, refused, shipped = (ops.get_job(r.id) for r in (first, staged, flow))
    print("charge:", done["state"], done["result"], "attempts:", done["attempt"])
    print("refused:", refused["state"], refused["error_code"], "after", refused["attempt"], "attempt")
    print("fulfil:", shipped["result"], "| steps:", [s["name"] for s in shipped["steps"]])
    print("gateway calls per order:", {n: GATEWAY_CALLS.count(n) for n in sorted(set(GATEWAY_CALLS))})
    print("beat entry ->", nightly.name, nightly.cron, nightly.tz)


if __name__ == "__main__":
    main()

# Output:
# a second enqueue of a live key is the same job: True True
# inside atomic(): staged = True
# charge: done {'order_id': 1, 'charged': 500, 'attempt': 2} attempts: 2
# refused: dead X_TERMINAL after 1 attempt
# fulfil: label for 10 from shelf-3 | steps: ['reserve', 'ship']
# gateway calls per order: {1: 2, 2: 1}
# beat entry -> nightly-fulfil-sweep 30 2 * * * Europe/Berlin
