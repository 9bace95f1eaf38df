"""The operator API (ultimate_jobs.ops): list_jobs pages newest first with keyset cursors and
filters; get_job answers one job as a plain JSON-ready dict.

Run it: python docs/examples/operating.py
"""

import atexit
import json
import tempfile
import textwrap

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

from ultimate_jobs import NO_TENANT, JobsError, Retry, Worker, job  # noqa: E402


@job(name="mail.digest", idempotency_key="digest:{user_id}", tenant=NO_TENANT, queue="mail",
     retry=Retry(attempts=1))
def digest(ctx, *, user_id: int, password: str = "") -> dict:
    if user_id == 3:
        raise ValueError("user 3 has no address")
    return {"sent": user_id}


def main() -> None:
    from django.core.management import call_command

    from ultimate_jobs import ops

    call_command("migrate", verbosity=0)
    results = digest.enqueue_many([{"user_id": n} for n in range(1, 6)])
    secret = digest.enqueue(user_id=6, password="hunter2")
    Worker(queues=["mail"], burst=True).run()

    page = ops.list_jobs(queue="mail", limit=2)
    seen = [row["payload"]["user_id"] for row in page["jobs"]]
    while page["next"]:
        page = ops.list_jobs(queue="mail", limit=2, after=page["next"])
        seen += [row["payload"]["user_id"] for row in page["jobs"]]
    print("newest first, two a page:", seen)
    print("dead:", [row["payload"]["user_id"] for row in ops.list_jobs(state="dead")["jobs"]])
    # Ids are UUIDv7 (time-ordered): jobs of one millisecond share the first 12 hex digits.
    matches = ops.list_jobs(id_prefix=str(results[0].id)[:23])["jobs"]
    print("by id prefix:", [row["id"] == str(results[0].id) for row in matches])

    row = ops.get_job(results[2].id)
    print("get_job keys:")
    print(textwrap.fill(", ".join(sorted(row)), 96, initial_indent="  ", subsequent_indent="  "))
    print("state:", row["state"], "| stop_reason:", row["stop_reason"], "| steps:", row["steps"])
    print("redacted payload:", ops.get_job(secret.id)["payload"])
    print("JSON-ready:", bool(json.dumps(row)))
    for bad in ("not-a-uuid", "0190a3c2-0000-7000-8000-000000000000"):
        try:
            ops.get_job(bad)
        except JobsError as err:
            print("refused:", err.code)


if __name__ == "__main__":
    main()

# Output:
# newest first, two a page: [6, 5, 4, 3, 2, 1]
# dead: [3]
# by id prefix: [True]
# get_job keys:
#   attempt, attempts, backfill, claimed_by, concurrency_key, consumer, created_at, enqueued_by,
#   error_code, executions, finished_at, id, idempotency_key, last_error, max_attempts, name,
#   next_retry_at, payload, priority, progress, queue, result, run_at, run_id, sensitive,
#   staged_id, started_at, state, steps, stop_reason, task, tenant_id, updated_at, visible_at,
#   webhook
# state: dead | stop_reason: attempts-exhausted | steps: []
# redacted payload: {'user_id': 6, 'password': '[redacted]'}
# JSON-ready: True
# refused: X_ID_INVALID
# refused: X_JOB_NOT_FOUND
