"""Scheduled tasks: task(cron=..., tz=...), occurrences across a daylight-saving change, the
Scheduler's rounds (the first arms, the next fires once), catch-up after an outage, pause and
resume, task_fires() and a manual run.

The test clock (ultimate_jobs.clock) pins "now" so this prints the same thing on every run; in
production the database's clock decides.

Run it: python docs/examples/scheduler.py
"""

import atexit
import tempfile
from datetime import UTC, datetime

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

from ultimate_jobs import NO_TENANT, JobsError, Scheduler, clock, job, registered_tasks, task  # noqa: E402


@job(name="mail.digest", idempotency_key="digest:{kind}", tenant=NO_TENANT)
def send_digest(ctx, *, kind: str, day: str = "") -> None:
    pass


# At 02:30 Berlin time; the input is computed per occurrence (an aware UTC datetime).
nightly = task(name="nightly-digest", cron="30 2 * * *", tz="Europe/Berlin", job=send_digest,
               input=lambda at: {"kind": "daily", "day": at.date().isoformat()}, catch_up="skip")


def show(round_) -> None:
    fired = [f"{f.task} @ {f.occurrence:%Y-%m-%d %H:%M}Z" for f in round_.fired]
    print(f"  leading={round_.leading} fired={fired}")


def main() -> None:
    from django.core.management import call_command

    from ultimate_jobs import ops
    from ultimate_jobs.models import Job

    call_command("migrate", verbosity=0)
    for t in registered_tasks():  # the built-in retention purge is one
        print(f"task {t.name}: {t.cron!r} in {t.tz} -> {t.job.name}, catch_up={t.catch_up}")
    for bad in ({"tz": "Bogota"}, {"tz": "+02:00"}, {"cron": "61 * * * *"}, {"catch_up": "always"}):
        try:
            task(**{"name": "refused", "cron": "0 3 * * *", "tz": "UTC", "job": send_digest,
                    "input": {"kind": "x"}, **bad})
        except JobsError as err:
            print(f"refused {bad}: {err.code}")

    at = datetime(2026, 3, 28, 12, tzinfo=UTC)
    for _ in range(3):
        at = ops.next_task_run(nightly, at)
        print("next run:", at.isoformat())

    scheduler = Scheduler(tasks=[nightly])
    clock.freeze(datetime(2026, 3, 28, 12, tzinfo=UTC))
    print("first round (arms the watermark, fires nothing):")
    show(scheduler.run_once())
    clock.freeze(datetime(2026, 3, 29, 1, 0, 5, tzinfo=UTC))
    print("at 03:00:05 CEST, the first instant after the gap that swallowed 02:30:")
    show(scheduler.run_once())
    show(scheduler.run_once())
    print("job:", Job.objects.values_list("idempotency_key", "payload").get())

    clock.freeze(datetime(2026, 4, 2, 12, tzinfo=UTC))  # everything was down for three days
    print("after an outage, catch_up='skip' fires the latest missed occurrence once:")
    show(scheduler.run_once())

    ops.pause_task("nightly-digest")
    clock.freeze(datetime(2026, 4, 3, 12, tzinfo=UTC))
    print("paused:", ops.paused_tasks())
    show(scheduler.run_once())
    ops.resume_task(nightly)
    print("resumed:")
    show(scheduler.run_once())
    row = ops.task_fires(nightly)[0]
    for key in ("fires", "last_occurrence", "next_run_at", "missed_since"):
        print(f"  {key}: {row[key]}")

    manual, = nightly.enqueue()  # a manual run under the job's plain key
    print("manual run key:", Job.objects.get(id=manual.id).idempotency_key)
    clock.freeze(None)


if __name__ == "__main__":
    main()

# Output:
# task nightly-digest: '30 2 * * *' in Europe/Berlin -> mail.digest, catch_up=skip
# task ultimate_jobs.retention: '17 * * * *' in UTC -> ultimate_jobs.purge_retention, catch_up=skip
# refused {'tz': 'Bogota'}: X_TASK_DECLARATION_INVALID
# refused {'tz': '+02:00'}: X_TASK_DECLARATION_INVALID
# refused {'cron': '61 * * * *'}: X_TASK_DECLARATION_INVALID
# refused {'catch_up': 'always'}: X_TASK_DECLARATION_INVALID
# next run: 2026-03-29T01:00:00+00:00
# next run: 2026-03-30T00:30:00+00:00
# next run: 2026-03-31T00:30:00+00:00
# first round (arms the watermark, fires nothing):
#   leading=True fired=[]
# at 03:00:05 CEST, the first instant after the gap that swallowed 02:30:
#   leading=True fired=['nightly-digest @ 2026-03-29 01:00Z']
#   leading=True fired=[]
# job: ('nightly-digest:1774746000000:digest:daily', {'kind': 'daily', 'day': '2026-03-29'})
# after an outage, catch_up='skip' fires the latest missed occurrence once:
#   leading=True fired=['nightly-digest @ 2026-04-02 00:30Z']
# paused: ['nightly-digest']
#   leading=True fired=[]
# resumed:
#   leading=True fired=['nightly-digest @ 2026-04-03 00:30Z']
#   fires: 3
#   last_occurrence: 2026-04-03T00:30:00Z
#   next_run_at: 2026-04-04T00:30:00Z
#   missed_since: None
# manual run key: digest:daily
