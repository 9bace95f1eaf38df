"""Retry policies and the retry decision against values worked out by hand: each test here kills
mutants of ``ultimate_jobs/retry.py`` that the behaviour tests let live (``make mutation``)."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from tests.app import jobs
from ultimate_jobs import JobsError, Retry, RetryAfter, Terminal, register_error_retry, retry_schedule
from ultimate_jobs.retry import _ERROR_CLASSES, classify


@pytest.fixture(autouse=True)
def _classes() -> Iterator[None]:
    saved = dict(_ERROR_CLASSES)
    yield
    _ERROR_CLASSES.clear()
    _ERROR_CLASSES.update(saved)


class Coded(Exception):
    def __init__(self, code: object, retry_after: object = None) -> None:
        super().__init__("coded")
        self.code, self.retry_after = code, retry_after


def refusal(call, *args, **kwargs) -> JobsError:
    with pytest.raises(JobsError) as caught:
        call(*args, **kwargs)
    assert caught.value.code == "X_JOB_DECLARATION_INVALID"
    return caught.value


def test_the_manifest_shows_the_declared_policy_under_its_documented_keys() -> None:
    # tests.coded: Retry(attempts=4, delay="1s", max_delay="10s", jitter=False)
    assert jobs.coded.describe()["retry"] == {"attempts": 4, "backoff": "exponential", "delay": 1.0,
                                              "max_delay": 10.0, "jitter": False, "dead_letter": True}


def test_a_zero_delay_is_allowed_and_schedules_immediate_retries() -> None:
    assert retry_schedule(Retry(attempts=3, delay=0, backoff="fixed")) == [0.0, 0.0]
    assert retry_schedule(Retry(attempts=4, delay="2s", backoff="linear", max_delay="5s")) == [2.0, 4.0, 5.0]


def test_bad_policies_name_the_option_and_the_value() -> None:
    assert refusal(Retry, attempts=0).cause == "Retry(attempts=0) must be a whole number >= 1."
    assert refusal(Retry, backoff="cubic").cause == "Retry(backoff='cubic') is not one of exponential, linear, fixed."
    assert refusal(Retry, delay="soon").cause == "Retry.delay='soon' is not a duration."
    assert refusal(Retry, delay=-1).cause == "Retry.delay=-1 must be zero or more."
    assert refusal(Retry, max_delay="later").cause == "Retry.max_delay='later' is not a duration."
    assert refusal(Retry, max_delay=0).cause == "Retry.max_delay=0 must be positive."


def test_retry_accepts_a_policy_or_a_whole_number_only() -> None:
    assert Retry.coerce(5) == Retry(attempts=5)
    assert Retry.coerce(None) == Retry()
    assert refusal(Retry.coerce, "3").cause == "retry='3' is neither a Retry nor a number of attempts."
    assert refusal(Retry.coerce, 2.5).cause == "retry=2.5 is neither a Retry nor a number of attempts."
    assert refusal(Retry.coerce, True).cause == "retry=True is neither a Retry nor a number of attempts."


def test_jitter_draws_from_the_given_generator_between_half_and_the_whole_delay() -> None:
    policy = Retry(delay="10s", jitter=True)
    # base 10s: half fixed (5s) plus Random(7).uniform(0, 5), worked out once by hand.
    assert policy.delay_after(1, random.Random(7)) == 6.6191638241658115
    assert Retry(delay="10s", jitter=False).delay_after(1, random.Random(7)) == 10.0


def test_a_bad_classification_is_refused_whole_with_the_fix_listing_the_classes() -> None:
    err = refusal(register_error_retry, {"GOOD": "terminal", "": "terminal"})
    assert err.cause == "register_error_retry: '' -> 'terminal' is not valid."
    assert err.fix == "Map non-empty code strings to one of terminal, retry-after, retryable."
    often = refusal(register_error_retry, {"SOME": "often"})
    assert often.cause == "register_error_retry: 'SOME' -> 'often' is not valid."
    assert refusal(register_error_retry, {7: "terminal"}).cause == "register_error_retry: 7 -> 'terminal' is not valid."
    assert "GOOD" not in _ERROR_CLASSES  # validated before anything is registered


def test_classify_reads_the_code_and_the_delay() -> None:
    register_error_retry({"STOP": "terminal", "LATER": "retry-after"})
    assert classify(Terminal("no")) == ("terminal", None)
    assert classify(Coded("STOP")) == ("terminal", None)
    assert classify(Coded(["unhashable"])) == ("retryable", None)  # a non-string code is never looked up
    assert classify(RetryAfter(0)) == ("retry-after", 0.0)
    assert classify(Coded("LATER", 0.5)) == ("retry-after", 0.5)
    assert classify(Coded("LATER", "12")) == ("retry-after", 12.0)


@pytest.mark.parametrize("retry_after", [None, "soon", float("nan"), -1.0, object()])
def test_a_missing_or_unusable_retry_after_follows_the_schedule(retry_after: object) -> None:
    register_error_retry({"LATER": "retry-after"})
    assert classify(Coded("LATER", retry_after)) == ("retryable", None)
