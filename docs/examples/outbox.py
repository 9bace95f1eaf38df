"""The transactional outbox: an enqueue inside transaction.atomic() is staged in the caller's
transaction; the relay publishes what committed, under the staged ids, in staging order.

Run it: python docs/examples/outbox.py
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


@job(name="shop.send_receipt", idempotency_key="receipt:{order_id}", tenant=NO_TENANT)
def send_receipt(ctx, *, order_id: int) -> str:
    return f"receipt for order {order_id}"


def main() -> None:
    from django.core.management import call_command
    from django.db import transaction
    from django.test import override_settings

    from ultimate_jobs import ops
    from ultimate_jobs.outbox import Relay

    call_command("migrate", verbosity=0)

    # Commit: the enqueue is staged in the same transaction as the business write.
    with transaction.atomic():
        staged = send_receipt.enqueue(order_id=1001)  # e.g. right after order.save()
    print("staged:", staged.staged, "| deduped:", staged.deduped)
    print("before the relay:", ops.get_job(staged.id)["state"])

    # Rollback: the job never existed, so there is nothing to publish.
    try:
        with transaction.atomic():
            ghost = send_receipt.enqueue(order_id=1002)
            raise RuntimeError("payment declined")
    except RuntimeError:
        pass
    try:
        ops.get_job(ghost.id)
    except JobsError as err:
        print("rolled back:", err.code)

    # Several enqueues in one transaction publish in the order they were staged.
    with transaction.atomic():
        batch = send_receipt.enqueue_many([{"order_id": n} for n in (2001, 2002, 2003)])

    relay = Relay()
    print("published:", relay.drain())  # what `python manage.py jobs_relay --burst` does
    job = ops.get_job(staged.id)
    print("after the relay:", job["state"], "| same ids:", job["id"] == str(staged.id),
          job["run_id"] == str(staged.run_id))

    # A staged duplicate of a live job's key publishes into that job; get_job follows it.
    with transaction.atomic():
        again = send_receipt.enqueue(order_id=1001)
    relay.drain()
    followed = ops.get_job(again.id)
    print("duplicate became:", followed["id"] == str(staged.id), "| staged_id:", followed["staged_id"] == str(again.id))

    Worker(queues=["default"], burst=True).run()
    print("results:", [ops.get_job(r.id)["result"] for r in [staged, *batch]])

    # OUTBOX="required": an enqueue outside a transaction is refused.
    with override_settings(ULTIMATE_JOBS={"OUTBOX": "required"}):
        try:
            send_receipt.enqueue(order_id=3001)
        except JobsError as err:
            print("autocommit refused:", err.code)


if __name__ == "__main__":
    main()

# Output:
# staged: True | deduped: None
# before the relay: staged
# rolled back: X_JOB_NOT_FOUND
# published: 4
# after the relay: ready | same ids: True True
# duplicate became: True | staged_id: True
# results: ['receipt for order 1001', 'receipt for order 2001', 'receipt for order 2002', 'receipt for order 2003']
# autocommit refused: X_OUTBOX_NO_TX
