"""Fleet concurrency: at most `limit` runs of a key at once, across every worker. A busy key
either waits (uncounted) or fails with X_JOB_KEY_BUSY without running the body.

Run it: python docs/examples/concurrency.py
"""

import atexit
import tempfile
import time

import django
from django.conf import settings

TMP = tempfile.TemporaryDirectory()
atexit.register(TMP.cleanup)
settings.configure(
    INSTALLED_APPS=["ultimate_jobs"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": f"{TMP.name}/jobs.sqlite3",
                           "OPTIONS": {"timeout": 30, "transaction_mode": "IMMEDIATE"}}},
    USE_TZ=True,
)
django.setup()

from ultimate_jobs import Concurrency, Worker, job  # noqa: E402


@job(name="ledger.post", idempotency_key="post:{entry_id}", tenant="{account}",
     concurrency=Concurrency(key="{account}", limit=1, when_busy="wait"))
def post_entry(ctx, *, account: str, entry_id: int) -> int:
    time.sleep(0.2)  # one entry of an account at a time, whichever worker runs it
    return ctx.attempt


@job(name="ledger.close", idempotency_key="close:{account}:{day}", tenant="{account}",
     concurrency=Concurrency(key="{account}", limit=1, when_busy="fail"))
def close_day(ctx, *, account: str, day: str) -> None:
    time.sleep(0.5)


def main() -> None:
    from django.core.management import call_command

    from ultimate_jobs import ops

    call_command("migrate", verbosity=0)
    print("key:", post_entry.concurrency_key_for(account="acct-1", entry_id=1))

    waiting = post_entry.enqueue_many([{"account": "acct-1", "entry_id": n} for n in range(3)])
    # A busy key hands the claim back with run_at a moment later, so a burst worker can run out of
    # runnable work before the queued runs are due: run bursts until every entry is posted.
    for _ in range(50):
        Worker(queues=["default"], concurrency=3, burst=True).run()
        rows = [ops.get_job(r.id) for r in waiting]
        if all(row["state"] == "done" for row in rows):
            break
        time.sleep(0.1)
    print("wait:", [(row["state"], row["attempt"], row["result"]) for row in rows])

    failing = close_day.enqueue_many([{"account": "acct-2", "day": d} for d in ("mon", "tue")])
    Worker(queues=["default"], concurrency=2, burst=True).run()
    rows = sorted((ops.get_job(r.id) for r in failing), key=lambda row: row["state"])
    print("fail:", [(row["state"], row["error_code"], row["stop_reason"]) for row in rows])


if __name__ == "__main__":
    main()

# Output:
# key: ledger.post:acct-1
# wait: [('done', 1, 1), ('done', 1, 1), ('done', 1, 1)]
# fail: [('done', None, None), ('failed', 'X_JOB_KEY_BUSY', 'key-busy')]
