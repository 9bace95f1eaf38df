"""The loop shared by the worker, the relay and the scheduler: signals, back-off, burst, stop."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from ultimate_jobs.service_loop import BACKOFF_CAP, BACKOFF_FLOOR, Backoff, PassFailed, ServiceLoop


def _loop(**options: object) -> tuple[ServiceLoop, list[tuple[str, int]]]:
    calls: list[tuple[str, int]] = []
    loop = ServiceLoop(on_signal=lambda signum: calls.append(("first", signum)),
                       on_second_signal=lambda signum: calls.append(("second", signum)), **options)  # type: ignore[arg-type]
    return loop, calls


def test_backoff_starts_at_the_floor_doubles_and_stops_at_the_cap() -> None:
    backoff = Backoff()
    delays = [backoff.failed() for _ in range(10)]
    assert delays[:3] == [BACKOFF_FLOOR, BACKOFF_FLOOR * 2, BACKOFF_FLOOR * 4]
    assert delays[-1] == BACKOFF_CAP and max(delays) == BACKOFF_CAP
    backoff.reset()
    assert backoff.failed() == BACKOFF_FLOOR


def test_a_failed_pass_backs_off_and_a_good_one_resets_it() -> None:
    loop, _ = _loop(backoff=Backoff(floor=0.001, cap=0.004))
    seen: list[float] = []
    outcomes = iter([ValueError, ValueError, ValueError, ValueError, 0.0, ValueError, None])

    def tick() -> float | None:
        outcome = next(outcomes)
        if outcome is ValueError:
            raise ValueError("pass failed")
        return outcome  # type: ignore[return-value]

    loop.run(tick, errors=(ValueError,), on_error=lambda exc, delay: seen.append(delay), install_signals=False)
    assert seen == [0.001, 0.002, 0.004, 0.004, 0.001]


def test_a_tick_that_logged_its_own_failure_backs_off_by_the_current_delay() -> None:
    loop, _ = _loop(backoff=Backoff(floor=0.001, cap=0.004))
    ticks = iter(["fail", "fail", "done"])

    def tick() -> float | None:
        if next(ticks) == "fail":
            loop.backoff.failed()
            raise PassFailed
        return None

    loop.run(tick, install_signals=False)
    assert loop.backoff.delay == 0.0  # the good pass reset it


def test_other_errors_are_not_swallowed() -> None:
    loop, _ = _loop()

    def tick() -> float | None:
        raise KeyError("a bug")

    with pytest.raises(KeyError):
        loop.run(tick, errors=(ValueError,), install_signals=False)


def test_burst_ends_at_the_first_idle_pass() -> None:
    loop, _ = _loop(burst=True)
    found = iter([True, True, False])  # two passes find work, the third finds none
    passes: list[float | None] = []

    def tick() -> float | None:
        passes.append(0.0 if next(found) else loop.idle(30.0))
        return passes[-1]

    loop.run(tick, install_signals=False)
    assert passes == [0.0, 0.0, None]


def test_without_burst_an_idle_pass_waits_and_wake_cuts_the_wait_short() -> None:
    loop, _ = _loop()
    passes: list[int] = []

    def tick() -> float | None:
        passes.append(len(passes))
        if len(passes) == 1:
            threading.Timer(0.01, loop.wake).start()
            return loop.idle(60.0)  # would wait a minute: the wake ends it
        return None

    loop.run(tick, install_signals=False)
    assert passes == [0, 1]


def test_stop_ends_the_loop_after_the_pass_in_flight_unless_it_drains() -> None:
    loop, _ = _loop()
    passes: list[int] = []

    def tick() -> float | None:
        passes.append(1)
        loop.stop()
        return 60.0  # the stop cuts the wait short, and no further pass runs

    loop.run(tick, install_signals=False)
    assert passes == [1]

    draining, _ = _loop(drains=True)
    left = iter([0.0, 0.0, None])
    draining.stop()
    draining.run(lambda: next(left), install_signals=False)  # passes until the tick says it is done
    assert next(left, "exhausted") == "exhausted"


def test_signals_reach_the_service_and_the_old_handlers_come_back() -> None:
    loop, calls = _loop()
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    inside: dict[int, object] = {}

    def tick() -> float | None:
        inside.update({signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)})
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)
        return None

    loop.run(tick)
    assert all(handler not in before.values() for handler in inside.values())
    assert calls == [("first", signal.SIGTERM), ("second", signal.SIGINT)]
    assert {signum: signal.getsignal(signum) for signum in before} == before


def test_signals_are_left_alone_when_asked_or_off_the_main_thread() -> None:
    before = signal.getsignal(signal.SIGTERM)
    seen: list[object] = []

    def tick() -> float | None:
        seen.append(signal.getsignal(signal.SIGTERM))
        return None

    loop, _ = _loop()
    loop.run(tick, install_signals=False)
    other, _ = _loop()
    thread = threading.Thread(target=other.run, args=(tick,))
    thread.start()
    thread.join(5)
    assert seen == [before, before]


def test_the_listener_is_stopped_on_exit() -> None:
    class Listener:
        stopped = False

        def stop(self) -> None:
            self.stopped = True

    listener = Listener()
    loop, _ = _loop()

    def tick() -> float | None:
        raise KeyError("even when the loop breaks")

    with pytest.raises(KeyError):
        loop.run(tick, install_signals=False, listen=lambda: listener)
    assert listener.stopped
