"""``async def`` twins of the durable-run jobs in ``step_jobs``: the same steps awaited, some with a
``def`` fn (run off the loop) and some with an ``async def`` fn (awaited on it). Imported by the
app's ``ready()`` so real worker processes have them too. Effects are ``Effect`` rows, written on
the thread that owns the database work: a ``def`` fn writes directly, an ``async def`` fn through
``sync_to_async`` (``aeffect``), as a Django user's async code does."""

from __future__ import annotations

import asyncio
import os
import time

from asgiref.sync import sync_to_async

from ultimate_jobs import NO_TENANT, Retry, job

from .models import Effect
from .step_jobs import FIXED, effect

NOW = Retry(attempts=3, delay=0, **FIXED)


async def aeffect(ctx, key: str, **output: object) -> dict:
    """``effect`` from async code."""
    return await sync_to_async(effect)(ctx, key, **output)


@job(name="tests.async_steps.onboard", idempotency_key="a-onboard:{org}", tenant="{org}",
     retry=Retry(attempts=3, delay="1s", **FIXED))
async def onboard(ctx, *, org: str, nudge_failures: int = 2) -> dict:
    """``step_jobs.onboard`` awaited: a ``def`` step, then two ``async def`` ones; the nudge fails
    ``nudge_failures`` times."""
    provisioned = await ctx.step.run("provision", lambda: effect(ctx, f"provision:{org}", id=f"org-{org}"))

    async def welcome() -> dict:
        return await aeffect(ctx, f"welcome:{org}")

    await ctx.step.run("welcome-email", welcome)

    async def nudge() -> dict:
        await aeffect(ctx, f"nudge-try:{org}")
        if ctx.attempt <= nudge_failures:
            raise ConnectionError(f"mail server down (attempt {ctx.attempt})")
        return {"nudged": provisioned["id"]}

    await ctx.step.run("nudge", nudge)
    return {"org": provisioned["id"]}


@job(name="tests.async_steps.plain", idempotency_key="a-plain:{key}", tenant=NO_TENANT, retry=NOW)
async def plain(ctx, *, key: str) -> str:
    """Two checkpointed ``async def`` steps: the body is replay-safe."""
    await ctx.step.run("first", lambda: aeffect(ctx, f"first:{key}"))  # a def answering a coroutine
    await ctx.step.run("second", lambda: aeffect(ctx, f"second:{key}"))
    return "ok"


@job(name="tests.async_steps.sleeper", idempotency_key="a-sleeper:{key}", tenant=NO_TENANT, retry=1)
async def sleeper(ctx, *, key: str, seconds: float = 2.0) -> dict:
    await ctx.step.run("before", lambda: effect(ctx, f"before:{key}"))
    await ctx.step.sleep(seconds)
    await ctx.step.run("after", lambda: aeffect(ctx, f"after:{key}"))
    return {"pid": os.getpid(), "attempt": ctx.attempt}


@job(name="tests.async_steps.waiter", idempotency_key="a-wait:{key}", tenant=NO_TENANT)
async def waiter(ctx, *, key: str, timeout: float | None = None) -> object:
    reply = await ctx.step.wait_for_event("reply", "tests.reply", match={"key": key}, timeout=timeout)
    await ctx.step.run("after", lambda: aeffect(ctx, f"after-wait:{key}"))
    return reply


@job(name="tests.async_steps.checkout", idempotency_key="a-checkout:{order}", tenant=NO_TENANT, compensates=True,
     retry=NOW)
async def checkout(ctx, *, order: str, ship_failures: int = 99) -> str:
    """Charge, reserve, ship: a ship that keeps failing releases (a ``def`` compensator), then
    refunds (an ``async def`` one), last in first out."""

    async def refund(charge: dict) -> None:
        await aeffect(ctx, f"refund:{charge['id']}")

    await ctx.step.run("charge", lambda: aeffect(ctx, f"charge:{order}", id=f"ch-{order}"), compensate=refund)
    await ctx.step.run("reserve", lambda: effect(ctx, f"reserve:{order}", id=f"rs-{order}"),
                       compensate=lambda r: effect(ctx, f"release:{r['id']}"))

    def ship() -> None:
        effect(ctx, f"ship-try:{order}")
        if ctx.attempt <= ship_failures:
            raise RuntimeError(f"carrier refused (attempt {ctx.attempt})")

    await ctx.step.run("ship", ship)
    return "shipped"


@job(name="tests.async_steps.atomic", idempotency_key="a-atomic:{key}", tenant=NO_TENANT, retry=NOW)
async def atomic_write(ctx, *, key: str) -> str:
    await ctx.step.run("write", lambda: effect(ctx, f"atomic:{key}", external=False), atomic=True)
    await ctx.step.run("after", lambda: {"after": True})
    return "ok"


@job(name="tests.async_steps.once", idempotency_key="a-once:{key}", tenant=NO_TENANT, retry=NOW)
async def once_charge(ctx, *, key: str) -> dict:
    async def charge() -> dict:
        return await aeffect(ctx, f"once-charge:{key}", id=f"ch-{key}")

    charged = await ctx.step.run("charge", charge, once=True)
    await ctx.step.run("receipt", lambda: effect(ctx, f"receipt:{key}"))
    return charged


@job(name="tests.async_steps.long_step", idempotency_key="a-long:{key}", tenant=NO_TENANT, retry=NOW)
async def long_step(ctx, *, key: str, seconds: float, blocking: bool = False) -> str:
    """A first step, then a long one: awaited (``async def``: a drain cancels it at its await) or
    blocking on a thread (``def``: a drain lets it finish and keeps its checkpoint)."""
    await ctx.step.run("first", lambda: effect(ctx, f"first:{key}"))

    def first_try() -> bool:  # a step run again (after a drain or a kill) does not wait again
        return Effect.objects.filter(key=f"long-start:{key}").count() == 1

    async def waits() -> str:
        await aeffect(ctx, f"long-start:{key}")
        if await sync_to_async(first_try)():
            await asyncio.sleep(seconds)
        await aeffect(ctx, f"long-end:{key}")
        return "slept"

    def blocks() -> str:
        effect(ctx, f"long-start:{key}")
        if first_try():
            time.sleep(seconds)
        effect(ctx, f"long-end:{key}")
        return "slept"

    await ctx.step.run("long", blocks if blocking else waits)
    await ctx.step.run("last", lambda: effect(ctx, f"last:{key}"))
    return "ok"
