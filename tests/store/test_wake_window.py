"""SPEC §3's wake: at most one NOTIFY per queue per ``WAKE_WINDOW`` per process, and a wake the
window withholds is sent when the window ends, never left to the workers' idle poll."""

from __future__ import annotations

import threading
import time

import pytest

from tests.app.jobs import noop
from ultimate_jobs.db import JOBS_CHANNEL, store_for
from ultimate_jobs.db.listen import wait_until

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db(transaction=True)]


def test_an_enqueue_inside_the_window_is_woken_when_the_window_ends() -> None:
    heard: list[float] = []
    lock = threading.Lock()

    def on_wake(queue: str) -> None:
        if queue == "default":
            with lock:
                heard.append(time.monotonic())

    listener = store_for("default").listen(channel=JOBS_CHANNEL, on_wake=on_wake, queues=["default"])
    assert listener is not None
    try:
        assert wait_until(listener.connected.is_set, timeout=10)
        time.sleep(0.05)  # past any window an earlier test opened
        noop.enqueue(key="wake-first")  # the first in its window: its own NOTIFY, at its commit
        noop.enqueue(key="wake-second")  # inside the window: withheld, and owed
        # The owed wake is sent when the window ends (or the second was past it and sent its own):
        # either way a second wake comes. The 250 ms window sent none, leaving it to the idle poll.
        assert wait_until(lambda: len(heard) >= 2, timeout=2.0), heard
        time.sleep(0.1)
        assert len(heard) == 2, heard  # one per write here, never more
    finally:
        listener.stop()


def test_a_burst_sends_one_wake_per_window_not_one_per_enqueue() -> None:
    heard: list[str] = []
    listener = store_for("default").listen(channel=JOBS_CHANNEL, on_wake=heard.append, queues=["default"])
    assert listener is not None
    try:
        assert wait_until(listener.connected.is_set, timeout=10)
        time.sleep(0.05)
        heard.clear()
        begun = time.monotonic()
        for n in range(200):
            noop.enqueue(key=f"burst-{n}")
        took = time.monotonic() - begun
        time.sleep(0.1)
        windows = int(took / 0.01) + 2
        assert 1 <= heard.count("default") <= windows, (heard.count("default"), took)
    finally:
        listener.stop()
