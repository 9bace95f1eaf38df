"""How an ``async def`` body is cancelled, without a database: ``CancelToken.on_set`` and
``runtime.aio.run_body`` (the body's own task, cancelled once its token is set), and what
``ctx.progress`` answers (``Reported``)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from ultimate_jobs.context import CancelToken, Reported
from ultimate_jobs.errors import JobCancelled
from ultimate_jobs.runtime.aio import run_body


def test_on_set_calls_back_once_on_the_setting_thread_or_at_once_when_already_set() -> None:
    token = CancelToken()
    heard: list[tuple[str, str]] = []
    token.on_set(lambda: heard.append(("first", threading.current_thread().name)))
    setter = threading.Thread(target=lambda: token.set("X_DRAINING"), name="setter")
    setter.start()
    setter.join()
    assert token.set("X_ABORTED") is False  # the first reason wins, and nobody is called again
    token.on_set(lambda: heard.append(("late", threading.current_thread().name)))
    assert heard == [("first", "setter"), ("late", "MainThread")]
    assert token.reason == "X_DRAINING"


def test_a_set_token_cancels_the_body_at_its_next_await_and_answers_its_reason() -> None:
    token = CancelToken()
    seen: list[str] = []

    async def body() -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append(f"cancelled with the token already {token.reason}")
            raise
        return "finished"

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, lambda: threading.Thread(target=token.set, args=("X_JOB_TIMEOUT",)).start())
        with pytest.raises(JobCancelled) as err:
            await asyncio.wait_for(run_body(token, body()), timeout=10)
        assert err.value.code == "X_JOB_TIMEOUT"

    asyncio.run(main())
    assert seen == ["cancelled with the token already X_JOB_TIMEOUT"]


def test_a_body_that_swallows_the_cancel_and_returns_keeps_its_answer() -> None:
    token = CancelToken()

    async def stubborn() -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            return "carried on"
        return "slept"

    async def main() -> str:
        asyncio.get_running_loop().call_later(0.05, token.set, "X_DRAINING")
        return await run_body(token, stubborn())

    assert asyncio.run(main()) == "carried on"


def test_a_cancel_that_is_not_the_tokens_is_an_error_and_the_callers_own_cancel_propagates() -> None:
    async def cancels_itself() -> None:
        raise asyncio.CancelledError

    async def main() -> None:
        with pytest.raises(RuntimeError, match="cancelled"):
            await run_body(CancelToken(), cancels_itself())
        outer = asyncio.ensure_future(run_body(CancelToken(), asyncio.sleep(30)))
        await asyncio.sleep(0.01)
        outer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await outer

    asyncio.run(main())


def test_reported_awaits_its_write_and_is_fine_without_one() -> None:
    async def main() -> list[str]:
        done: list[str] = []

        async def write() -> None:
            await asyncio.sleep(0.01)
            done.append("written")

        await Reported()
        await Reported(asyncio.ensure_future(write()))
        return done

    assert asyncio.run(main()) == ["written"]
