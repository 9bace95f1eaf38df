"""Enqueue from async code (an async def view, an async task): aenqueue, aenqueue_many and
using(...).aenqueue answer what enqueue answers, and the event loop keeps running meanwhile.
From async code the enqueue is direct; to stage in the outbox, enqueue inside the
transaction.atomic() of a function run with sync_to_async.

Run it: python docs/examples/async_enqueue.py
"""

import asyncio
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

from ultimate_jobs import NO_TENANT, JobsError, job  # noqa: E402


@job(name="shop.send_receipt", idempotency_key="receipt:{order_id}", tenant=NO_TENANT)
def send_receipt(ctx, *, order_id: int) -> str:
    return f"receipt for {order_id}"


async def main_async() -> object:
    from asgiref.sync import sync_to_async
    from django.core.exceptions import SynchronousOnlyOperation
    from django.db import transaction

    try:
        send_receipt.enqueue(order_id=1)
    except SynchronousOnlyOperation:
        print("enqueue from the event loop: SynchronousOnlyOperation")

    first = await send_receipt.aenqueue(order_id=1)
    again = await send_receipt.aenqueue(order_id=1)
    print("aenqueue:", first.deduped, first.staged, "| again:", again.deduped, again.id == first.id)
    many = await send_receipt.aenqueue_many([{"order_id": 2}, {"order_id": 3}, {"order_id": 2}])
    print("aenqueue_many deduped:", [r.deduped for r in many])
    later = await send_receipt.using(delay="1h", priority=-1).aenqueue(order_id=4)
    try:
        await send_receipt.aenqueue(order=5)
    except JobsError as err:
        print("refused:", err.code)

    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0)
            ticks += 1

    ticking = asyncio.ensure_future(ticker())
    await send_receipt.aenqueue_many([{"order_id": n} for n in range(100, 1100)])
    ticking.cancel()
    print("the loop ran on during the statement:", ticks > 0)

    def place_order() -> object:  # sync code: the outbox stages in its transaction
        with transaction.atomic():
            return send_receipt.enqueue(order_id=6)

    staged = await sync_to_async(place_order)()
    print("staged in the outbox:", staged.staged, staged.deduped)
    return later


def main() -> None:
    from django.core.management import call_command

    from ultimate_jobs import ops

    call_command("migrate", verbosity=0)
    later = asyncio.run(main_async())
    print("delayed:", ops.get_job(later.id)["state"])


if __name__ == "__main__":
    main()

# Output:
# enqueue from the event loop: SynchronousOnlyOperation
# aenqueue: False False | again: True True
# aenqueue_many deduped: [False, False, True]
# refused: X_JOB_INPUT_INVALID
# the loop ran on during the statement: True
# staged in the outbox: True None
# delayed: delayed
