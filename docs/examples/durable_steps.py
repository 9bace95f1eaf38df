"""Durable steps: ctx.step.run checkpoints each step, a retry replays completed steps from storage
and re-runs only the failed one; once=True is at most once; atomic=True commits the step's ORM
writes with its checkpoint; the step rules refuse duplicates and unstorable outputs.

Run it: python docs/examples/durable_steps.py
"""

import atexit
import datetime as dt
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

from ultimate_jobs import NO_TENANT, Retry, Worker, job, ops  # noqa: E402

CALLS = []
NOW_RETRY = Retry(attempts=3, backoff="fixed", delay=0, jitter=False)  # retries runnable at once


@job(name="accounts.onboard", idempotency_key="onboard:{org}", tenant="{org}", retry=NOW_RETRY)
def onboard(ctx, *, org: str) -> dict:
    def provision() -> dict:
        CALLS.append("provision")
        return {"id": f"org-{org}", "created": dt.datetime(2026, 1, 2, tzinfo=dt.UTC), "tags": ("new",)}

    def nudge() -> str:
        CALLS.append(f"nudge (attempt {ctx.attempt})")
        if ctx.attempt < 3:
            raise ConnectionError("mail server down")
        return "sent"

    account = ctx.step.run("provision", provision)   # the stored JSON form, on the first run too
    ctx.step.run("welcome-email", lambda: CALLS.append("welcome") or "sent")
    ctx.step.run("nudge", nudge)
    return {"org": account["id"], "created": account["created"], "tags": account["tags"]}


@job(name="billing.charge", idempotency_key="charge:{order}", tenant=NO_TENANT, retry=NOW_RETRY)
def charge(ctx, *, order: int) -> dict:
    def gateway() -> dict:
        CALLS.append("gateway called")
        raise TimeoutError("no answer: was the card charged?")

    return ctx.step.run("charge", gateway, once=True)  # never called twice, even across crashes


@job(name="teams.create", idempotency_key="team:{name}", tenant=NO_TENANT, retry=NOW_RETRY)
def create_team(ctx, *, name: str) -> int:
    def write() -> int:
        group = Group.objects.create(name=name)       # commits with the checkpoint, or not at all
        if ctx.attempt == 1:
            raise RuntimeError("failed after the write")
        return group.pk

    return ctx.step.run("create", write, atomic=True)


@job(name="demo.rules", idempotency_key="rules:{case}", tenant=NO_TENANT, retry=NOW_RETRY)
def rules(ctx, *, case: str) -> None:
    if case == "duplicate":
        ctx.step.run("same", lambda: 1)
        ctx.step.run("same", lambda: 2)
    else:
        ctx.step.run("rows", lambda: float("nan"))


def run() -> None:
    Worker(queues=["default"], burst=True).run()


def main() -> None:
    from django.core.management import call_command

    call_command("migrate", verbosity=0)

    result = onboard.enqueue(org="acme")
    run()
    job = ops.get_job(result.id)
    print(job["state"], "after", job["attempt"], "attempts:", job["result"])
    print("calls:", ", ".join(CALLS))
    for step in job["steps"]:
        print(f"  {step['name']:<14} {step['status']:<10} executions={step['executions']}")

    CALLS.clear()
    charged = charge.enqueue(order=7)
    run()
    job = ops.get_job(charged.id)
    print("once:", job["state"], job["error_code"], "| attempts:", job["attempt"], "| calls:", CALLS)
    ops.resolve_step(charged.id, "charge", ran=True, output={"charge": "ch_123", "checked": "by hand"})
    ops.retry_job(charged.id)
    run()
    job = ops.get_job(charged.id)
    print("resolved:", job["state"], job["result"], "| calls:", CALLS)

    team = create_team.enqueue(name="ops")
    run()
    job = ops.get_job(team.id)
    print("atomic:", job["state"], "| groups named ops:", Group.objects.filter(name="ops").count(),
          "| step executions:", job["steps"][0]["executions"])

    for case in ("duplicate", "nan"):
        job = ops.get_job(rules.enqueue(case=case).id)
        run()
        job = ops.get_job(job["id"])
        print(f"{case}:", job["state"], job["error_code"], "attempt", job["attempt"])


if __name__ == "__main__":
    main()

# Output:
# done after 3 attempts: {'org': 'org-acme', 'created': '2026-01-02T00:00:00Z', 'tags': ['new']}
# calls: provision, welcome, nudge (attempt 1), nudge (attempt 2), nudge (attempt 3)
#   provision      completed  executions=1
#   welcome-email  completed  executions=1
#   nudge          completed  executions=3
# once: dead X_STEP_OUTCOME_UNKNOWN | attempts: 2 | calls: ['gateway called']
# resolved: done {'charge': 'ch_123', 'checked': 'by hand'} | calls: ['gateway called']
# atomic: done | groups named ops: 1 | step executions: 2
# duplicate: dead X_STEP_DUPLICATE attempt 1
# nan: dead X_STEP_OUTPUT_UNSERIALIZABLE attempt 1
