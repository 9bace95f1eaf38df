"""docs/testing.md's worked example, as written there (the app module inlined): if this fails,
the guide is wrong."""

from __future__ import annotations

import sys
import types

import pytest

from tests.app.models import Effect
from ultimate_jobs import Retry, job
from ultimate_jobs.registry import unregister as _unregister
from ultimate_jobs.testing import assert_enqueued, assert_not_enqueued, record_effect

pytestmark = pytest.mark.django_db

# -- accounts/mail.py ---------------------------------------------------------------------------------
mail = types.ModuleType("guide_mail")


def _send_mail(to, template):
    record_effect(f"mail:{template}:{to}")
    return {"to": to, "template": template}


mail.send_mail = _send_mail  # type: ignore[attr-defined]
sys.modules["guide_mail"] = mail


# -- accounts/jobs.py (Org is played by the suite's Effect model) ----------------------------------------
def provision(org_id: str) -> dict:
    org, _ = Effect.objects.get_or_create(key=f"org:{org_id}")
    return {"id": f"org-{org_id}", "owner": f"owner@{org_id}.example"}


@pytest.fixture(scope="module")
def guide_jobs():
    @job(name="guide.report_signup", idempotency_key="signup-report:{org_id}", tenant="{org_id}")
    def report_signup(ctx, *, org_id: str) -> None: ...

    @job(name="guide.onboard_org", idempotency_key="onboard:{org_id}", tenant="{org_id}",
         retry=Retry(attempts=5, delay="10m"))
    def onboard_org(ctx, *, org_id: str) -> dict:
        org = ctx.step.run("provision", lambda: provision(org_id))
        ctx.step.run("welcome-email", lambda: mail.send_mail(org["owner"], "welcome"))
        ctx.step.sleep("3d")
        ctx.step.run("nudge", lambda: mail.send_mail(org["owner"], "nudge"))
        report_signup.enqueue(org_id=org_id)
        return {"org": org["id"]}

    yield onboard_org, report_signup
    _unregister("guide.onboard_org")
    _unregister("guide.report_signup")


# -- accounts/tests/test_onboarding.py, verbatim but for the fixture that hands the jobs over --------------
def test_the_nudge_waits_three_days_and_only_it_is_retried(guide_jobs, jobs_clock, run_job, drain_jobs,
                                                           monkeypatch):
    onboard_org, report_signup = guide_jobs
    failures = iter([ConnectionError("mail server down")])

    def flaky_send(to, template):
        if template == "nudge" and (error := next(failures, None)):
            raise error
        return {"to": to, "template": template}

    monkeypatch.setattr(mail, "send_mail", flaky_send)

    trace = run_job(onboard_org, org_id="acme")
    assert trace.state == "suspended"
    assert trace.attempt == 0
    assert_not_enqueued(report_signup, org_id="acme")

    assert drain_jobs(advance="2d") == []

    (trace, report) = drain_jobs(advance="1d")
    assert trace.state == "done" and trace.result == {"org": "org-acme"}
    assert trace.steps["provision"].executions == 1
    assert trace.steps["welcome-email"].executions == 1
    assert trace.steps["nudge"].executions == 2
    assert report.name == report_signup.name
    assert_enqueued(report_signup, states=("done",), org_id="acme")


def test_a_crash_at_any_step_boundary_never_sends_an_email_twice(guide_jobs, jobs_clock, crash_proof):
    onboard_org, _ = guide_jobs
    report = crash_proof(onboard_org, {"org_id": "initech"})
    assert ("after_checkpoint_commit", "welcome-email") in report.boundaries
