"""What the wake costs a single enqueue: variants alternated in small blocks, so the machine's
noise falls on each alike.

Ad hoc, run by hand (see docs/scaling.md); not part of make bench. Monkeypatches internals, so it
tracks the code it was written against. No worker listens, as in the bench's single-enqueue case.
"""

# ruff: noqa: E402  (Django is set up before the app's modules are imported)

import itertools
import os
import statistics
import time

import _boot  # noqa: F401  (sets up Django on a throwaway bench database; see _boot.py)

from bench import measure

measure.recreate_database()
from bench.jobs import noop
from ultimate_jobs import enqueue as enq
from ultimate_jobs.db import wake

seq = itertools.count(10**9)
BLOCK = int(os.environ.get("BLOCK", "100"))
ROUNDS = int(os.environ.get("ROUNDS", "30"))
real_due, real_owe = enq._wake_due, wake.WAKES.owe


def library():
    noop.enqueue(i=-1, seq=next(seq))


def patched(due=None, owe=None):
    def run():
        enq._wake_due = due or real_due
        wake.WAKES.owe = owe or real_owe
        try:
            noop.enqueue(i=-1, seq=next(seq))
        finally:
            enq._wake_due, wake.WAKES.owe = real_due, real_owe
    return run


def inline_only(store, rows, channel):  # the window's first write notifies; nothing is owed
    now, _later = real_due(store, rows, channel)
    return now, []


def owe_notifying_always(alias, channel, queues, window):  # the owe before this experiment (05826a8)
    if not queues:
        return
    w = wake.WAKES
    now = time.monotonic()
    with w._lock:
        for queue in queues:
            key = (alias, channel, queue)
            if key not in w._owed:
                w._owed[key] = max(now, w._last.get(key, now) + window)
        w._start()
        w._lock.notify()


variants = {
    "library, owe wakes its thread each time": patched(owe=owe_notifying_always),
    "library (inline NOTIFY + owed wakes)": library,
    "no wake at all": patched(due=lambda *a, **k: ([], [])),
    "inline NOTIFY only, none owed": patched(due=inline_only),
    "NOTIFY on every enqueue": patched(due=lambda store, rows, channel: (list({r.queue for r in rows}), [])),
}
res = {k: [] for k in variants}
for fn in variants.values():  # warm each path first
    for _ in range(20):
        fn()
for _ in range(ROUNDS):
    for name, fn in variants.items():
        t0 = time.perf_counter()
        for _ in range(BLOCK):
            fn()
        res[name].append((time.perf_counter() - t0) / BLOCK * 1e6)
for k, v in res.items():
    q1, _, q3 = statistics.quantiles(v, n=4)
    print(f"{k:40} median {statistics.median(v):6.0f} us/enqueue ({1e6 / statistics.median(v):5.0f}/s), "
          f"quartiles {q1:.0f}-{q3:.0f}, blocks of {BLOCK} x {len(v)}")
measure.drop_database()
