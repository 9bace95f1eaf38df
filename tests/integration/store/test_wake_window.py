"""The wake an enqueue sends idle workers: at most one NOTIFY per queue per ``WAKE_WINDOW`` per
process, and a wake the window withholds is sent when the window ends, never left to the workers'
idle poll."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.app.jobs import noop
from ultimate_jobs.db import JOBS_CHANNEL, OUTBOX_CHANNEL, store_for
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
        time.sleep(0.25)  # past any window an earlier test opened
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
    with _listening() as heard:
        begun = time.monotonic()
        for n in range(200):
            noop.enqueue(key=f"burst-{n}")
        took = time.monotonic() - begun
        time.sleep(0.1)
        windows = int(took / 0.01) + 2
        assert 1 <= heard.count("default") <= windows, (heard.count("default"), took)


@pytest.fixture
def wide_window(settings: Any) -> float:
    """A 200 ms WAKE_WINDOW, so a second enqueue is inside the first one's window even on a
    loaded machine (these tests need the wake it withholds); answers the window in seconds."""
    settings.ULTIMATE_JOBS = {**settings.ULTIMATE_JOBS, "WAKE_WINDOW": "200ms"}
    return 0.2


@contextmanager
def _listening() -> Iterator[list[str]]:
    """A LISTEN session on the jobs channel, connected, with no wake session of an earlier test
    left open; answers the queues it hears, in order."""
    from ultimate_jobs.db import wake

    heard: list[str] = []
    listener = store_for("default").listen(channel=JOBS_CHANNEL, on_wake=heard.append, queues=["default"])
    assert listener is not None
    try:
        assert wait_until(listener.connected.is_set, timeout=10)
        assert wait_until(lambda: not wake.WAKES._open, timeout=wake.LINGER + 2)
        time.sleep(0.25)  # past any window an earlier test opened
        heard.clear()  # the listener's own wake when it connected
        yield heard
    finally:
        listener.stop()


def _other_sessions() -> set[int]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity"
                       " WHERE datname = current_database() AND pid <> pg_backend_pid()")
        return {pid for (pid,) in cursor.fetchall()}


def test_the_wake_session_is_kept_while_wakes_are_owed_and_closed_after_it_lingers(wide_window: float) -> None:
    from ultimate_jobs.db import wake

    with _listening() as heard:
        before = _other_sessions()
        sessions: list[set[int]] = []
        for n in range(3):  # three windows, each with an owed wake
            time.sleep(wide_window + 0.05)
            heard.clear()
            noop.enqueue(key=f"linger-{n}-a")
            noop.enqueue(key=f"linger-{n}-b")
            assert wait_until(lambda: len(heard) >= 2, timeout=2.0), heard
            sessions.append(_other_sessions() - before)
        # One session sent every owed wake: the same backend, not a new one per window.
        assert len(sessions[0]) == 1 and sessions[0] == sessions[1] == sessions[2], sessions
        # And it is closed once wakes stop, so nothing holds the database (DROP DATABASE waits 5 s).
        assert wait_until(lambda: not (_other_sessions() - before), timeout=wake.LINGER + 2), _other_sessions()


def test_a_kept_wake_session_cut_while_it_idled_is_replaced_and_the_wake_still_sent(caplog, wide_window: float) -> None:
    from django.db import connection

    from ultimate_jobs.db import wake

    with _listening() as heard:
        before = _other_sessions()
        noop.enqueue(key="cut-1a")
        noop.enqueue(key="cut-1b")  # owed: the wake thread opens its session and keeps it
        assert wait_until(lambda: len(heard) >= 2, timeout=2.0), heard
        kept = _other_sessions() - before
        assert len(kept) == 1, kept
        with connection.cursor() as cursor:  # as a server restart or an idle timeout would
            cursor.execute("SELECT pg_terminate_backend(%s)", [next(iter(kept))])
        assert wait_until(lambda: not (_other_sessions() & kept), timeout=5)
        heard.clear()
        time.sleep(wide_window + 0.05)
        noop.enqueue(key="cut-2a")
        noop.enqueue(key="cut-2b")  # owed again: sent on a new session, not lost to the idle poll
        assert wait_until(lambda: len(heard) >= 2, timeout=2.0), heard
        assert "jobs.wake.failed" not in caplog.text
        assert wait_until(lambda: not wake.WAKES._open, timeout=wake.LINGER + 2)


def test_a_staged_enqueue_wakes_the_relays_and_one_its_window_withholds_is_sent_when_it_ends(
        wide_window: float) -> None:
    from django.db import transaction

    heard: list[str] = []
    listener = store_for("default").listen(channel=OUTBOX_CHANNEL, on_wake=heard.append, queues=["default"])
    assert listener is not None
    try:
        assert wait_until(listener.connected.is_set, timeout=10)
        time.sleep(wide_window + 0.05)  # past any window an earlier test opened
        heard.clear()  # the listener's own wake when it connected
        with transaction.atomic():
            noop.enqueue(key="staged-first")  # staged: its NOTIFY goes with the commit
        assert wait_until(lambda: heard.count("default") >= 1, timeout=2.0), heard
        with transaction.atomic():
            noop.enqueue(key="staged-second")  # inside the window: withheld, then owed
        assert wait_until(lambda: heard.count("default") >= 2, timeout=2.0), heard
    finally:
        listener.stop()
