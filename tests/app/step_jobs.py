"""Durable-run jobs the suite runs (steps, sleeps, events, compensation); imported by the app's
``ready()`` so real worker processes have them too. Each effect is an ``Effect`` row (and a
``record_effect`` count), so a test can prove how often it happened and in which process."""

from __future__ import annotations

import os

from ultimate_jobs import NO_TENANT, Retry, job
from ultimate_jobs.testing import record_effect

from .models import Effect

FIXED = {"backoff": "fixed", "jitter": False}


def effect(ctx, key: str, *, external: bool = True, **output: object) -> dict:
    """An effect: an ``Effect`` row, plus (``external``) a ``record_effect`` count standing for a
    call outside the database, which no rollback undoes."""
    Effect.objects.create(key=key, job_id=ctx.job_id, attempt=ctx.attempt, pid=os.getpid())
    if external:
        record_effect(key)
    return {"key": key, **output}


@job(name="tests.steps.onboard", idempotency_key="onboard:{org}", tenant="{org}",
     retry=Retry(attempts=3, delay="1s", **FIXED))
def onboard(ctx, *, org: str, nudge_failures: int = 2) -> dict:
    """The onboarding example: provision, welcome, nudge; the nudge fails ``nudge_failures`` times."""
    provisioned = ctx.step.run("provision", lambda: effect(ctx, f"provision:{org}", id=f"org-{org}"))
    ctx.step.run("welcome-email", lambda: effect(ctx, f"welcome:{org}"))

    def nudge() -> dict:
        effect(ctx, f"nudge-try:{org}")
        if ctx.attempt <= nudge_failures:
            raise ConnectionError(f"mail server down (attempt {ctx.attempt})")
        return {"nudged": provisioned["id"]}

    ctx.step.run("nudge", nudge)
    return {"org": provisioned["id"]}


@job(name="tests.steps.sleeper", idempotency_key="sleeper:{key}", tenant=NO_TENANT, retry=1)
def sleeper(ctx, *, key: str, seconds: float = 2.0) -> dict:
    ctx.step.run("before", lambda: effect(ctx, f"before:{key}"))
    ctx.step.sleep(seconds)
    ctx.step.run("after", lambda: effect(ctx, f"after:{key}"))
    return {"pid": os.getpid(), "attempt": ctx.attempt}


@job(name="tests.steps.swallower", idempotency_key="swallow:{key}", tenant=NO_TENANT)
def swallower(ctx, *, key: str) -> str:
    try:
        ctx.step.sleep("nap", "1h")
    except Exception:  # the suspension is a BaseException: this never catches it
        return "swallowed"
    return "woke"


@job(name="tests.steps.waiter", idempotency_key="wait:{key}", tenant=NO_TENANT)
def waiter(ctx, *, key: str, timeout: float | None = None) -> object:
    reply = ctx.step.wait_for_event("reply", "tests.reply", match={"key": key}, timeout=timeout)
    ctx.step.run("after", lambda: effect(ctx, f"after-wait:{key}"))
    return reply


@job(name="tests.steps.checkout", idempotency_key="checkout:{order}", tenant=NO_TENANT, compensates=True,
     retry=Retry(attempts=3, delay=0, **FIXED))
def checkout(ctx, *, order: str, ship_failures: int = 99, release_failures: int = 0) -> str:
    """Charge, reserve, ship: a ship that keeps failing releases, then refunds (LIFO)."""
    ctx.step.run("charge", lambda: effect(ctx, f"charge:{order}", id=f"ch-{order}"),
                 compensate=lambda c: effect(ctx, f"refund:{c['id']}"))

    def release(r: dict) -> None:
        if Effect.objects.filter(key=f"release-try:{order}").count() < release_failures:
            effect(ctx, f"release-try:{order}")
            raise RuntimeError("the stock service is down")
        effect(ctx, f"release:{r['id']}")

    ctx.step.run("reserve", lambda: effect(ctx, f"reserve:{order}", id=f"rs-{order}"), compensate=release)

    def ship() -> None:
        effect(ctx, f"ship-try:{order}")
        if ctx.attempt <= ship_failures:
            raise RuntimeError(f"carrier refused (attempt {ctx.attempt})")

    ctx.step.run("ship", ship)
    return "shipped"


@job(name="tests.steps.atomic", idempotency_key="atomic:{key}", tenant=NO_TENANT,
     retry=Retry(attempts=3, delay=0, **FIXED))
def atomic_write(ctx, *, key: str) -> str:
    ctx.step.run("write", lambda: effect(ctx, f"atomic:{key}", external=False), atomic=True)
    ctx.step.run("after", lambda: {"after": True})
    return "ok"


@job(name="tests.steps.once", idempotency_key="once:{key}", tenant=NO_TENANT,
     retry=Retry(attempts=3, delay=0, **FIXED))
def once_charge(ctx, *, key: str) -> dict:
    charge = ctx.step.run("charge", lambda: effect(ctx, f"once-charge:{key}", id=f"ch-{key}"), once=True)
    ctx.step.run("receipt", lambda: effect(ctx, f"receipt:{key}"))
    return charge


@job(name="tests.steps.plain", idempotency_key="plain:{key}", tenant=NO_TENANT,
     retry=Retry(attempts=3, delay=0, **FIXED))
def plain(ctx, *, key: str) -> str:
    """Two checkpointed steps: the body is replay-safe."""
    ctx.step.run("first", lambda: effect(ctx, f"first:{key}"))
    ctx.step.run("second", lambda: effect(ctx, f"second:{key}"))
    return "ok"


@job(name="tests.steps.outside", idempotency_key="outside:{key}", tenant=NO_TENANT,
     retry=Retry(attempts=3, delay=0, **FIXED))
def outside(ctx, *, key: str) -> str:
    """Does its effect outside any step: every replay repeats it."""
    record_effect(f"outside:{key}")
    ctx.step.run("first", lambda: {"ok": 1})
    ctx.step.run("second", lambda: {"ok": 2})
    return "ok"
