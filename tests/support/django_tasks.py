"""Module-level Django tasks the backend tests enqueue (Django refuses tasks defined elsewhere)."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from ultimate_jobs.contrib.tasks import job_context, retry
from ultimate_jobs.contrib.tasks.framework import TaskContext, task

CALLS: list[tuple[str, Any]] = []


@task()
def noop() -> None:
    return None


@task()
def calculate(x: int, y: int, *, label: str = "sum") -> dict[str, Any]:
    CALLS.append(("calculate", (x, y, label)))
    return {"label": label, "value": x + y, "items": [x, y]}


@task(queue_name="emails")
def send_email(to: str, password: str = "") -> str:
    CALLS.append(("send_email", to))
    return f"sent to {to}"


@task()
def record(name: str) -> str:
    CALLS.append(("record", name))
    return name


@task()
def failing(message: str) -> None:
    raise ValueError(message)


@task()
def exits(code: int) -> None:
    sys.exit(code)


@task()
def unserializable() -> object:
    return object()


@task(takes_context=True)
def with_context(context: TaskContext, value: int) -> dict[str, Any]:
    return {"id": context.task_result.id, "attempt": context.attempt, "value": value,
            "status": str(context.task_result.status), "workers": list(context.task_result.worker_ids)}


@task()
async def async_add(x: int, y: int) -> int:
    await asyncio.sleep(0)
    return x + y


@task()
@retry(attempts=3, backoff="fixed", delay=0, jitter=False)
def flaky(fail_times: int, name: str) -> str:
    CALLS.append(("flaky", name))
    if sum(1 for kind, value in CALLS if kind == "flaky" and value == name) <= fail_times:
        raise RuntimeError(f"flaky {name} failing")
    return "finally"


STEP_CALLS: list[str] = []


@task(takes_context=True)
@retry(attempts=2, backoff="fixed", delay=0, jitter=False)
def durable(context: TaskContext, order: str) -> dict[str, Any]:
    ctx = job_context(context)

    def charge() -> str:
        STEP_CALLS.append(order)
        return f"charge-{order}"

    charged = ctx.step.run("charge", charge)
    if context.attempt == 1:
        raise ConnectionError("the shipping API timed out")
    return {"charged": charged, "attempt": ctx.attempt, "job_id": str(ctx.job_id)}


@task(takes_context=True)
@retry(attempts=2, backoff="fixed", delay=0, jitter=False)
async def async_durable(context: TaskContext, order: str) -> dict[str, Any]:
    """``durable`` as an ``async def`` task: an awaited step and a ``def`` step, progress, then a
    failure on the first attempt; the retry replays both steps from storage."""
    ctx = job_context(context)

    async def charge() -> str:
        STEP_CALLS.append(order)
        await asyncio.sleep(0)
        return f"charge-{order}"

    charged = await ctx.step.run("charge", charge)
    shipped = await ctx.step.run("ship", lambda: STEP_CALLS.append(f"ship {order}") or f"ship-{order}")
    await ctx.progress(1, total=1, note="charged and shipped")
    if context.attempt == 1:
        raise ConnectionError("the shipping API timed out")
    return {"charged": charged, "shipped": shipped, "attempt": ctx.attempt, "job_id": str(ctx.job_id)}


@task(takes_context=True)
async def async_napper(context: TaskContext, seconds: float) -> str:
    """An ``async def`` task that suspends on a durable sleep and resumes in a later claim."""
    ctx = job_context(context)
    await ctx.step.sleep("nap", seconds)
    return "rested"


@task()
async def async_long(seconds: float) -> str:
    """An ``async def`` task that awaits for ``seconds``: a drain cancels it at its await."""
    await asyncio.sleep(seconds)
    return "woke"
