"""The operator API's writes and fleet reads (ultimate_jobs.ops): retry (from a step), cancel,
promote, remove, their bounded bulk forms, queue pause, queue_stats, counters, workers, doctor.

Run it: python docs/examples/operator_actions.py
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

from ultimate_jobs import NO_TENANT, JobsError, Retry, Scheduler, Worker, job  # noqa: E402

FIXED = set()  # orders whose bug has been "fixed" by the operator


@job(name="billing.charge", idempotency_key="charge:{order_id}", tenant=NO_TENANT, queue="billing",
     retry=Retry(attempts=2, delay=0, jitter=False))
def charge(ctx, *, order_id: int, api_key: str = "") -> dict:
    if order_id not in FIXED:
        raise ConnectionError(f"gateway refused order {order_id} (api_key={api_key})")
    return {"charged": order_id}


def refused(call, *args, **kwargs) -> str:
    try:
        call(*args, **kwargs)
    except JobsError as err:
        return err.code
    return "accepted"


def main() -> None:
    from datetime import timedelta

    from django.core.management import call_command

    from ultimate_jobs import ops
    from ultimate_jobs.models import JobStep

    call_command("migrate", verbosity=0)
    first = charge.enqueue(order_id=1, api_key="sk_live_42")
    for n in range(2, 6):
        charge.enqueue(order_id=n)
    Worker(queues=["billing"], burst=True).run()
    print("stats:", {k: ops.queue_stats()[0][k] for k in ("queue", "ready", "dead", "total")})
    print("stored error is redacted:", "sk_live_42" not in ops.get_job(first.id)["last_error"])

    FIXED.update({1, 2, 3, 4, 5})
    # Durable steps record their progress per run; a retry from a step drops it and later ones.
    for seq, (name, status) in enumerate([("reserve", "completed"), ("capture", "failed")]):
        JobStep.objects.create(run_id=first.run_id, name=name, status=status, seq=seq, executions=1)
    again = ops.retry_job(first.id, from_step="capture")
    print("retry_job:", again["state"], "attempt", again["attempt"], "steps", [s["name"] for s in again["steps"]])
    print("retry twice:", refused(ops.retry_job, first.id))
    print("requeue_many:", ops.requeue_many(state="dead", queue="billing"))
    print("requeue_many again:", ops.requeue_many(state="dead", queue="billing"))
    Worker(queues=["billing"], burst=True).run()
    print("after the fix:", sorted(j["state"] for j in ops.list_jobs(queue="billing")["jobs"]))

    later = charge.using(delay=timedelta(hours=1)).enqueue(order_id=6)
    print("promote_job:", ops.promote_job(later.id)["state"])
    print("promote again:", refused(ops.promote_job, later.id))
    print("cancel_job:", ops.cancel_job(later.id, reason="customer left")["state"])
    print("cancel again:", refused(ops.cancel_job, later.id))
    print("remove_job:", ops.remove_job(later.id)["removed"])
    charge.using(delay=timedelta(hours=1)).enqueue(order_id=7)
    print("promote_many:", ops.promote_many(state="delayed", queue="billing"))
    print("remove_many:", ops.remove_many(state="ready", queue="billing"))

    print("pause_queue:", ops.pause_queue("billing", by="ann")["paused"],
          [p["queue"] for p in ops.paused_queues()])
    print("resume_queue:", ops.resume_queue("billing"))
    print("counters:", ops.counters("billing.charge")["totals"])
    print("counter_totals:", [(t["outcome"], t["count"]) for t in ops.counter_totals()])
    print("workers (none running now):", ops.workers())
    report = ops.doctor()
    # No scheduler has run here, so the watermark check cannot judge the built-in retention task:
    # it is "skipped", and a skipped check is not healthy.
    print("doctor:", report["ok"], [(c["name"], c["status"]) for c in report["checks"] if c["status"] != "ok"])
    Scheduler().run_once()  # one scheduler round arms every declared task
    print("doctor after a scheduler round:", ops.doctor()["ok"])
    print("unknown id:", refused(ops.get_job, "0190a3c2-0000-7000-8000-000000000000"))


if __name__ == "__main__":
    main()

# Output:
# stats: {'queue': 'billing', 'ready': 0, 'dead': 5, 'total': 5}
# stored error is redacted: True
# retry_job: ready attempt 0 steps ['reserve']
# retry twice: X_JOB_NOT_REQUEUEABLE
# requeue_many: {'affected': 4, 'remaining': 0}
# requeue_many again: {'affected': 0, 'remaining': 0}
# after the fix: ['done', 'done', 'done', 'done', 'done']
# promote_job: ready
# promote again: X_JOB_NOT_PROMOTABLE
# cancel_job: cancelled
# cancel again: X_JOB_NOT_CANCELLABLE
# remove_job: True
# promote_many: {'affected': 1, 'remaining': 0}
# remove_many: {'affected': 1, 'remaining': 0}
# pause_queue: True ['billing']
# resume_queue: {'queue': 'billing', 'paused': False, 'was_paused': True}
# counters: {'cancelled': 1, 'dead': 5, 'done': 5, 'retried': 5}
# counter_totals: [('cancelled', 1), ('dead', 5), ('done', 5), ('retried', 5)]
# workers (none running now): []
# doctor: False [('scheduler-watermarks', 'skipped'), ('prepared-statements', 'not-applicable'), ('wake', 'not-applicable')]
# doctor after a scheduler round: True
# unknown id: X_JOB_NOT_FOUND
