"""Purges: purge(name, targets) calls purge_expired(now) on each target in its own durable step,
with one clock reading per pass; a retry does not redo the targets already done; the refusals at
declaration; the built-in retention purge, which is one (finished jobs and stored events).

The test clock (ultimate_jobs.clock) pins "now" so this prints the same thing on every run.

Run it: python docs/examples/purge.py
"""

import atexit
import tempfile
from datetime import UTC, datetime, timedelta

import django
from django.conf import settings

TMP = tempfile.TemporaryDirectory()
atexit.register(TMP.cleanup)
settings.configure(
    INSTALLED_APPS=["django.contrib.sessions", "ultimate_jobs"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": f"{TMP.name}/jobs.sqlite3"}},
    USE_TZ=True,
)
django.setup()

from django.contrib.sessions.models import Session  # noqa: E402

from ultimate_jobs import JobsError, Retry, Worker, clock, ops, publish_event, purge  # noqa: E402

NOW = datetime(2026, 6, 1, 4, 0, tzinfo=UTC)
CALLS = []


class ExpiredSessions:
    name = "sessions"  # the step is "purge:sessions"

    def purge_expired(self, now):
        CALLS.append(f"sessions at {now:%H:%M}")
        return Session.objects.filter(expire_date__lt=now).delete()[0]


class ThumbnailCache:
    """A class whose purge_expired is a classmethod: labelled by its class name."""

    entries = {"a.png": NOW - timedelta(days=2), "b.png": NOW + timedelta(days=2)}
    failures = 1  # the cache server is down for the first call

    @classmethod
    def purge_expired(cls, now):
        CALLS.append(f"ThumbnailCache at {now:%H:%M}")
        if cls.failures:
            cls.failures -= 1
            raise ConnectionError("cache server down")
        expired = [key for key, until in cls.entries.items() if until < now]
        for key in expired:
            del cls.entries[key]
        return {"files": len(expired), "kept": len(cls.entries)}


nightly = purge(name="myapp.nightly-purge", targets=[ExpiredSessions(), ThumbnailCache],
                retry=Retry(attempts=3, backoff="fixed", delay=0, jitter=False))


def run() -> None:
    Worker(queues=["default"], burst=True).run()


def main() -> None:
    from django.core.management import call_command

    from ultimate_jobs.factories.retention import purge_retention
    from ultimate_jobs.models import Job, JobEvent

    call_command("migrate", verbosity=0)
    clock.freeze(NOW)
    for key, expires in (("old", NOW - timedelta(hours=1)), ("live", NOW + timedelta(days=1))):
        Session.objects.create(session_key=key, session_data="", expire_date=expires)

    result = nightly.enqueue()  # no input: the key is the name, so one pass is live at a time
    run()
    job = ops.get_job(result.id)
    answer = job["result"]  # {"name", "now": one clock reading for the pass, "targets": {label: output}}
    print(job["state"], "after", job["attempt"], "attempts:", answer["name"], "at", answer["now"])
    print("targets:", answer["targets"])
    print("calls:", ", ".join(CALLS))
    for step in job["steps"]:
        print(f"  {step['name']:<21} {step['status']:<10} executions={step['executions']}")
    print("sessions left:", list(Session.objects.values_list("session_key", flat=True)))

    class NoMethod:
        pass

    codes = set()
    for targets in ([], [NoMethod()], [ThumbnailCache, ThumbnailCache]):
        try:
            purge(name="p", targets=targets)
        except JobsError as err:
            codes.add(err.code)
            print("refused:", err.cause)
    print("codes:", sorted(codes))

    # The built-in retention purge (fired hourly by the task "ultimate_jobs.retention") is a purge too.
    Job.objects.filter(id=result.id).update(finished_at=NOW - timedelta(days=15))  # past DONE_RETENTION
    clock.freeze(NOW - timedelta(days=91))
    publish_event("invoice.paid", {"invoice": 7})  # past DEAD_RETENTION
    clock.freeze(NOW)
    publish_event("invoice.paid", {"invoice": 8})
    swept = purge_retention.enqueue()
    run()
    print("retention:", ops.get_job(swept.id)["result"]["targets"])
    print("jobs left:", list(Job.objects.values_list("name", flat=True)))
    print("events left:", list(JobEvent.objects.values_list("payload", flat=True)))
    clock.freeze(None)


if __name__ == "__main__":
    main()

# Output:
# done after 2 attempts: myapp.nightly-purge at 2026-06-01T04:00:00Z
# targets: {'sessions': 1, 'ThumbnailCache': {'files': 1, 'kept': 1}}
# calls: sessions at 04:00, ThumbnailCache at 04:00, ThumbnailCache at 04:00
#   now                   completed  executions=1
#   purge:sessions        completed  executions=1
#   purge:ThumbnailCache  completed  executions=2
# sessions left: ['live']
# refused: purge 'p': targets is empty; a purge needs something to purge.
# refused: purge 'p': target 'NoMethod' has no callable purge_expired(now).
# refused: purge 'p': two targets share the label 'ThumbnailCache' (a label names the target's step).
# codes: ['X_JOB_DECLARATION_INVALID']
# retention: {'jobs': {'jobs': 1, 'steps': 3, 'batches': 1}, 'events': {'events': 1, 'batches': 1}, 'webhook-deliveries': {'deliveries': 0, 'receipts': 0, 'batches': 2}}
# jobs left: ['ultimate_jobs.purge_retention']
# events left: [{'invoice': 8}]
