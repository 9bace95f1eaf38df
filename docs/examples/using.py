"""Per-call options with .using(): delay or run_at, queue, priority, tenant_id, run_id, enqueued_by.

Run it: python docs/examples/using.py
"""

import atexit
import tempfile
import uuid
from datetime import timedelta

import django
from django.conf import settings
from django.utils import timezone

TMP = tempfile.TemporaryDirectory()
atexit.register(TMP.cleanup)
settings.configure(
    INSTALLED_APPS=["ultimate_jobs"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": f"{TMP.name}/jobs.sqlite3"}},
    USE_TZ=True,
)
django.setup()

from ultimate_jobs import JobsError, Worker, job  # noqa: E402


@job(name="crm.sync_contact", idempotency_key="contact:{contact_id}", tenant="{org}")
def sync_contact(ctx, *, org: str, contact_id: int) -> dict:
    return {"queue": ctx.queue, "tenant": ctx.tenant_id, "by": ctx.enqueued_by}


def main() -> None:
    from django.core.management import call_command

    from ultimate_jobs import ops

    call_command("migrate", verbosity=0)

    later = sync_contact.using(delay="1h").enqueue(org="acme", contact_id=1)
    at = sync_contact.using(run_at=timezone.now() + timedelta(days=1)).enqueue(org="acme", contact_id=2)
    run_id = uuid.UUID("01234567-89ab-7def-8123-456789abcdef")
    urgent = sync_contact.using(queue="urgent", priority=-10, run_id=run_id, tenant_id="acme",
                                enqueued_by="user:7").enqueue(org="acme", contact_id=3)
    print("delayed:", ops.get_job(later.id)["state"], ops.get_job(at.id)["state"])
    print("run_id kept:", urgent.run_id == run_id)

    for bad in ({"delay": "1h", "run_at": timezone.now()}, {"queue": "Not A Queue"}, {"run_id": "nope"}):
        try:
            sync_contact.using(**bad).enqueue(org="acme", contact_id=4)
        except JobsError as err:
            print("refused:", sorted(bad), err.code)

    Worker(queues=["urgent"], burst=True).run()
    row = ops.get_job(urgent.id)
    print(row["queue"], row["priority"], row["state"], row["result"])


if __name__ == "__main__":
    main()

# Output:
# delayed: delayed delayed
# run_id kept: True
# refused: ['delay', 'run_at'] X_JOB_INPUT_INVALID
# refused: ['queue'] X_QUEUE_INVALID
# refused: ['run_id'] X_ID_INVALID
# urgent -10 done {'queue': 'urgent', 'tenant': 'acme', 'by': 'user:7'}
