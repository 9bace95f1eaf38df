"""A consumer declared in the test process and in worker processes (``JOBS_TEST_MODULES``).

The stream of key ``k`` is the numbers ``1..TEST_CONSUMER_ITEMS``; the app's tables are
``Effect`` rows: ``item:<key>:<n>`` once per handled item, ``cursor:<key>`` holding the cursor
in ``attempt``. ``TEST_CONSUMER_PAUSE`` seconds are spent per batch, so a process test can kill or
drain a worker mid-stream: inside ``handle`` (its transaction open) by default, or in the stream
before each batch with ``TEST_CONSUMER_PAUSE_IN=stream`` — on SQLite, whose one writer lock a
transaction held that long would keep the worker's own loop (and its signal handling) waiting.
"""

from __future__ import annotations

import os
import time
from typing import Any

from tests.app.models import Effect
from ultimate_jobs import NO_TENANT, Retry, consumer

ITEMS = int(os.environ.get("TEST_CONSUMER_ITEMS", "50"))
PAUSE = float(os.environ.get("TEST_CONSUMER_PAUSE", "0"))
PAUSE_IN = os.environ.get("TEST_CONSUMER_PAUSE_IN", "handle")


def load(key: str) -> int:
    return Effect.objects.filter(key=f"cursor:{key}").values_list("attempt", flat=True).first() or 0


def save(key: str, following: int) -> None:
    if not Effect.objects.filter(key=f"cursor:{key}").update(attempt=following):
        Effect.objects.create(key=f"cursor:{key}", attempt=following)


def stream(*, key: str, cursor: int, cancel: Any) -> Any:
    for n in range(cursor + 1, ITEMS + 1):
        if cancel.is_set():
            return
        if PAUSE and PAUSE_IN == "stream" and n % 10 == 1:
            time.sleep(PAUSE)
        yield {"n": n}


def handle(items: list[dict[str, int]], *, key: str) -> int:
    Effect.objects.bulk_create([Effect(key=f"item:{key}:{item['n']}", pid=os.getpid()) for item in items])
    if PAUSE and PAUSE_IN == "handle":
        time.sleep(PAUSE)
    return items[-1]["n"]


numbers = consumer(name="tests.consumer.numbers", tenant=NO_TENANT, keys=lambda: ["a", "b"], open=stream,
                   handle=handle, cursor=(load, save), batch=10, lag=lambda *, key, cursor: ITEMS - cursor,
                   retry=Retry(attempts=3, delay="50ms"))
