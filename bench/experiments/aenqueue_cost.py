"""What ``aenqueue`` costs against ``enqueue`` (issue 26): calls a second, variants alternated in
blocks so the machine's noise falls on each alike.

- ``enqueue``: the sync call in a loop (one commit each);
- ``aenqueue, 1 coroutine``: one coroutine awaiting ``aenqueue`` in a loop (the statement on
  asgiref's thread-sensitive thread, the loop free meanwhile);
- ``aenqueue, 50 coroutines``: 50 coroutines on one loop awaiting ``aenqueue`` at once, as a bare
  asyncio program would: they share the one thread-sensitive thread, so their statements queue;
- ``aenqueue, 50 coroutines, one context each``: each coroutine in its own asgiref
  ``ThreadSensitiveContext``, as Django's ASGI handler runs each request: each gets its own thread
  and so its own connection, and the statements run side by side;
- ``enqueue, 1 thread`` is the baseline the ratios are read against.

Besides calls a second (wall clock, which the machine's other load moves), each block's CPU time in
this process (``time.process_time()``, every thread) is reported per call: what the hop costs the
caller, which load moves far less.

Ad hoc, run by hand (see docs/scaling.md); not part of make bench.
    .venv/bin/python bench/experiments/aenqueue_cost.py [CALLS_PER_BLOCK] [ROUNDS]
"""

# ruff: noqa: E402  (Django is set up before the app's modules are imported)

import asyncio
import itertools
import statistics
import sys
import time

import _boot  # noqa: F401  (sets up Django on a throwaway bench database; see _boot.py)
from asgiref.sync import ThreadSensitiveContext, sync_to_async

from bench import measure

measure.recreate_database()
from django.db import connections

from bench.jobs import noop

BLOCK = int(sys.argv[1]) if len(sys.argv) > 1 else 500
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 7
FAN = 50
seq = itertools.count(10**12)


def sync_block() -> None:
    for _ in range(BLOCK):
        noop.enqueue(i=-1, seq=next(seq))


async def one_coroutine() -> None:
    for _ in range(BLOCK):
        await noop.aenqueue(i=-1, seq=next(seq))


async def _share(calls: int) -> None:
    for _ in range(calls):
        await noop.aenqueue(i=-1, seq=next(seq))


async def fifty_coroutines() -> None:
    await asyncio.gather(*(_share(BLOCK // FAN) for _ in range(FAN)))


async def _own_context(calls: int) -> None:
    async with ThreadSensitiveContext():
        await _share(calls)
        await sync_to_async(connections.close_all)()  # what Django's request_finished does


async def fifty_contexts() -> None:
    await asyncio.gather(*(_own_context(BLOCK // FAN) for _ in range(FAN)))


VARIANTS = {
    "enqueue, 1 thread": sync_block,
    "aenqueue, 1 coroutine": lambda: asyncio.run(one_coroutine()),
    "aenqueue, 50 coroutines": lambda: asyncio.run(fifty_coroutines()),
    "aenqueue, 50 coroutines, one context each": lambda: asyncio.run(fifty_contexts()),
}

try:
    for run in VARIANTS.values():  # warm each path
        run()
    rates: dict[str, list[float]] = {name: [] for name in VARIANTS}
    cpu: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for r in range(ROUNDS):
        for name, run in VARIANTS.items():
            began, began_cpu = time.perf_counter(), time.process_time()
            run()
            rates[name].append(BLOCK / (time.perf_counter() - began))
            cpu[name].append((time.process_time() - began_cpu) / BLOCK * 1e6)
        print(f"round {r}: " + ", ".join(f"{name} {v[-1]:.0f}/s" for name, v in rates.items()), flush=True)
finally:
    asyncio.run(sync_to_async(connections.close_all)())
    connections.close_all()
    measure.drop_database()

base = statistics.median(rates["enqueue, 1 thread"])
base_cpu = statistics.median(cpu["enqueue, 1 thread"])
print(f"\n{BLOCK} calls a block, medians of {ROUNDS} alternated rounds (PostgreSQL, one commit a call)")
for name, values in rates.items():
    median = statistics.median(values)
    low, high = min(values), max(values)
    own = statistics.median(cpu[name])
    print(f"{name:44} {median:7.0f} calls/s  [{low:.0f}-{high:.0f}]  {median / base:.2f}x enqueue  "
          f"CPU {own:5.0f} us/call ({own - base_cpu:+.0f})")
