"""Durable steps in an async def body: the same calls as a def body's, awaited. An async def step
is awaited on the event loop; a def step runs on a thread (atomic=True takes a def: its ORM writes
commit with the checkpoint); a retry replays completed steps from storage; compensators may be
def or async def; sleeps and event waits suspend as in a def body.

Run it: python docs/examples/async_steps.py
"""

import asyncio
import atexit
import tempfile

import django
from django.conf import settings

TMP = tempfile.TemporaryDirectory()
atexit.register(TMP.cleanup)
settings.configure(
    INSTALLED_APPS=["django.contrib.auth", "django.contrib.contenttypes", "ultimate_jobs"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": f"{TMP.name}/jobs.sqlite3"}},
    USE_TZ=True,
)
django.setup()

from django.contrib.auth.models import Group  # noqa: E402

from ultimate_jobs import NO_TENANT, Retry, Worker, job, publish_event  # noqa: E402

CALLS = []
NOW_RETRY = Retry(attempts=3, backoff="fixed", delay=0, jitter=False)  # retries runnable at once


@job(name="fx.refresh", idempotency_key="fx:{day}", tenant=NO_TENANT, retry=NOW_RETRY)
async def refresh_rates(ctx, *, day: str) -> dict:
    async def fetch() -> dict:                      # an async def step: awaited on the event loop
        CALLS.append("fetch")
        await asyncio.sleep(0.01)                   # e.g. an httpx.AsyncClient call
        return {"USD": 1.08, "GBP": 0.85}

    def store(rates: dict) -> int:                  # a def step: on a thread, never on the loop
        Group.objects.create(name=f"rates-{day}")   # commits with the checkpoint (atomic=True)
        return len(rates)

    def publish() -> str:
        CALLS.append(f"publish (attempt {ctx.attempt})")
        if ctx.attempt < 2:
            raise ConnectionError("the cache is down")
        return "published"

    rates = await ctx.step.run("fetch", fetch)
    stored = await ctx.step.run("store", lambda: store(rates), atomic=True)
    await ctx.progress(2, total=3)                  # awaitable: waits until the write landed
    await ctx.step.run("publish", publish)
    return {"day": day, "stored": stored, "usd": rates["USD"]}


@job(name="fx.hedge", idempotency_key="hedge:{order}", tenant=NO_TENANT, compensates=True, retry=NOW_RETRY)
async def hedge(ctx, *, order: int) -> None:
    async def unbook(booking: dict) -> None:        # an async def compensator
        CALLS.append(f"unbook {booking['id']}")

    await ctx.step.run("book", lambda: {"id": f"bk_{order}"}, compensate=unbook)
    await ctx.step.run("confirm", lambda: CALLS.append("confirm") or 1 / 0)   # fails on every attempt


@job(name="fx.await_settlement", idempotency_key="settle:{order}", tenant=NO_TENANT)
async def await_settlement(ctx, *, order: int) -> object:
    await ctx.step.sleep("cool-off", "50ms")        # suspends: the worker is released
    return await ctx.step.wait_for_event("settled", "fx.settled", match={"order": order}, timeout="1h")


def run() -> None:
    Worker(queues=["default"], burst=True).run()


def main() -> None:
    import time

    from django.core.management import call_command

    from ultimate_jobs import ops

    call_command("migrate", verbosity=0)

    job_row = ops.get_job(refresh_rates.enqueue(day="2026-12-01").id)
    run()
    job_row = ops.get_job(job_row["id"])
    print(job_row["state"], "after", job_row["attempt"], "attempts:", job_row["result"])
    print("calls:", ", ".join(CALLS))
    print("groups:", list(Group.objects.values_list("name", flat=True)), "| progress:", job_row["progress"])
    for step in job_row["steps"]:
        print(f"  {step['name']:<8} {step['status']:<10} executions={step['executions']}")

    CALLS.clear()
    hedged = ops.get_job(hedge.enqueue(order=7).id)
    run()
    hedged = ops.get_job(hedged["id"])
    print("hedge:", hedged["state"], "| calls:", ", ".join(CALLS))

    waiting = await_settlement.enqueue(order=9)
    run()
    print("sleeping:", ops.get_job(waiting.id)["state"])
    time.sleep(0.1)
    run()
    print("waiting:", ops.get_job(waiting.id)["state"])
    print("publish woke:", publish_event("fx.settled", {"order": 9, "rate": 1.07}))
    run()
    settled = ops.get_job(waiting.id)
    print("settled:", settled["state"], settled["result"], "| steps:", [s["name"] for s in settled["steps"]])


if __name__ == "__main__":
    main()

# Output:
# done after 2 attempts: {'day': '2026-12-01', 'stored': 2, 'usd': 1.08}
# calls: fetch, publish (attempt 1), publish (attempt 2)
# groups: ['rates-2026-12-01'] | progress: {'done': 2, 'total': 3, 'note': None}
#   fetch    completed  executions=1
#   store    completed  executions=1
#   publish  completed  executions=2
# hedge: dead | calls: confirm, confirm, confirm, unbook bk_7
# sleeping: suspended
# waiting: suspended
# publish woke: 1
# settled: done {'order': 9, 'rate': 1.07} | steps: ['cool-off', 'settled']
