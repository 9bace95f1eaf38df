"""The benchmark's no-op job, discovered by ultimate_jobs like any app's ``jobs`` module.

Its first line reports the start time when asked: ``i >= 0`` sends ``"i time.time()"`` as one UDP
datagram to ``127.0.0.1:$BENCH_UDP_PORT`` (the pickup-latency listener); ``i < 0`` is a plain no-op.
Every enqueue passes a fresh ``seq``, so each is a new job and none takes the dedupe path.
"""

from __future__ import annotations

import functools
import os
import socket
import time
from typing import Any

from ultimate_jobs import NO_TENANT, job

_sock: socket.socket | None = None


@job(name="bench.noop", idempotency_key="noop:{seq}", tenant=NO_TENANT)
def noop(ctx: object, *, i: int, seq: int) -> None:
    if i >= 0:
        report_start(i, time.time())


def report_start(i: int, started: float) -> None:
    global _sock
    port = os.environ.get("BENCH_UDP_PORT")
    if port:
        _sock = _sock or socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        _sock.sendto(f"{i} {started!r}".encode(), ("127.0.0.1", int(port)))


# Two-step durable runs, for bench/experiments/async_steps_drain.py: the same two checkpoints from
# a def body, from an async def body awaiting async def steps, and from one awaiting def steps.
@job(name="bench.two_steps", idempotency_key="two:{seq}", tenant=NO_TENANT)
def two_steps(ctx: Any, *, seq: int) -> int:
    first: int = ctx.step.run("a", lambda: seq)
    second: int = ctx.step.run("b", lambda: first + 1)
    return second


async def _answer(value: int) -> int:
    return value


@job(name="bench.two_steps_async", idempotency_key="two-async:{seq}", tenant=NO_TENANT)
async def two_steps_async(ctx: Any, *, seq: int) -> int:
    first: int = await ctx.step.run("a", functools.partial(_answer, seq))
    second: int = await ctx.step.run("b", functools.partial(_answer, first + 1))
    return second


@job(name="bench.two_steps_async_def", idempotency_key="two-async-def:{seq}", tenant=NO_TENANT)
async def two_steps_async_def(ctx: Any, *, seq: int) -> int:
    first: int = await ctx.step.run("a", lambda: seq)
    second: int = await ctx.step.run("b", lambda: first + 1)
    return second
