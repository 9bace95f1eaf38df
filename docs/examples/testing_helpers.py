"""ultimate_jobs.testing outside pytest: run_job and drain with a frozen clock, the trace they
answer, crash_proof (killed at every step boundary: a double effect is X_JOB_CRASH_DIVERGED), and
the enqueue assertions. docs/testing.md shows the same as a pytest suite with the fixtures.

Run it: python docs/examples/testing_helpers.py
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

from ultimate_jobs import JobsError, Retry, job  # noqa: E402
from ultimate_jobs.testing import record_effect  # noqa: E402

NUDGE_FAILURES = {"left": 1}


def send(kind: str, org: str) -> dict:
    record_effect(f"{kind}:{org}")        # an external effect crash_proof counts
    return {"sent": kind}


@job(name="accounts.onboard", idempotency_key="onboard:{org}", tenant="{org}", retry=Retry(attempts=3, delay="10m"))
def onboard(ctx, *, org: str) -> str:
    ctx.step.run("welcome", lambda: send("welcome", org))
    ctx.step.sleep("3d")

    def nudge() -> dict:
        if NUDGE_FAILURES["left"]:
            NUDGE_FAILURES["left"] -= 1
            raise ConnectionError("mail server down")
        return send("nudge", org)

    ctx.step.run("nudge", nudge)
    report.enqueue(org=org)
    return "onboarded"


@job(name="accounts.report", idempotency_key="report:{org}", tenant="{org}")
def report(ctx, *, org: str) -> None:
    return None


@job(name="accounts.careless", idempotency_key="careless:{org}", tenant="{org}", retry=3)
def careless(ctx, *, org: str) -> None:
    send("welcome", org)                  # outside a step: every replay sends it again
    ctx.step.run("audit", lambda: "logged")


def main() -> None:
    from django.core.management import call_command

    from ultimate_jobs.testing import assert_enqueued, assert_not_enqueued, crash_proof, drain, freeze_clock, run_job

    call_command("migrate", verbosity=0)
    with freeze_clock():
        trace = run_job(onboard, org="acme")
        print(trace.state, "| steps:", {name: s.status for name, s in trace.steps.items()})
        traces = drain(advance="3d")       # the sleep ends; the nudge fails once, its 10m retry passes
        print("drained:", [(t.name, t.state) for t in traces])   # the report it enqueued ran too
        trace = traces[0]
        print(trace.state, trace.result, "| attempt", trace.attempt)
        print("executions:", {name: s.executions for name, s in trace.steps.items()})
        assert_enqueued(report, states=("done",), org="acme")
        assert_not_enqueued(report, org="globex")

        NUDGE_FAILURES["left"] = 0
        proof = crash_proof(onboard, {"org": "initech"})
        print("crash_proof passed at", len(proof.boundaries), "boundaries, e.g.", proof.boundaries[1])
        try:
            crash_proof(careless, {"org": "hooli"})
        except JobsError as err:
            print(err.code, "-", err.cause.split(" (")[0])


if __name__ == "__main__":
    main()

# Output:
# suspended | steps: {'welcome': 'completed', 'sleep:1': 'started'}
# drained: [('accounts.onboard', 'done'), ('accounts.report', 'done')]
# done onboarded | attempt 2
# executions: {'welcome': 1, 'sleep:1': 1, 'nudge': 2}
# crash_proof passed at 4 boundaries, e.g. ('after_checkpoint_commit', 'welcome')
# X_JOB_CRASH_DIVERGED - accounts.careless: killed at before_step_body of step 'audit' and resumed, the effect 'effect:welcome:hooli' happened 2 time(s) where an uncrashed run does it 1 time(s)
