"""Durations, retry policies and the retry decision, against values worked out by hand: schedules,
jitter from a seeded generator, classification, and each refusal naming the option and the value."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from datetime import timedelta

import pytest

from tests.app import jobs
from ultimate_jobs import JobsError, Retry, RetryAfter, Terminal, register_error_retry, retry_schedule
from ultimate_jobs.durations import to_seconds
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


@pytest.mark.parametrize(("text", "seconds"), [
    ("250ms", 0.25), ("30s", 30), ("10m", 600), ("3h", 10800), ("3d", 259200), (timedelta(minutes=2), 120),
    (5, 5.0), (1.5, 1.5),
])
def test_durations_parse(text: object, seconds: float) -> None:
    assert to_seconds(text, subject="x") == seconds


@pytest.mark.parametrize("bad", ["", "ten", "5 weeks", "-1s", math.nan, math.inf, -3, True, None, [1]])
def test_bad_durations_are_refused(bad: object) -> None:
    with pytest.raises(JobsError) as err:
        to_seconds(bad, subject="timeout")
    assert err.value.code == "X_CONFIG_INVALID"
    assert "timeout" in err.value.cause


def test_zero_is_refused_where_a_positive_is_needed() -> None:
    with pytest.raises(JobsError):
        to_seconds(0, subject="x")
    assert to_seconds(0, subject="x", positive=False) == 0


def test_retry_schedule_is_exact_without_jitter() -> None:
    assert retry_schedule(Retry(attempts=5, delay="1s")) == [1.0, 2.0, 4.0, 8.0]
    assert retry_schedule(Retry(attempts=4, delay="2s", backoff="linear")) == [2.0, 4.0, 6.0]
    assert retry_schedule(Retry(attempts=3, delay="5s", backoff="fixed")) == [5.0, 5.0]
    assert retry_schedule(Retry(attempts=6, delay="1s", max_delay="5s")) == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert retry_schedule(1) == []


def test_equal_jitter_stays_within_half_and_whole_of_the_base() -> None:
    policy = Retry(attempts=10, delay="1s", jitter=True)
    rng = random.Random(7)
    for attempt in range(1, 10):
        base = policy.base_delay(attempt)
        samples = [policy.delay_after(attempt, rng) for _ in range(200)]
        assert all(base / 2 <= s <= base for s in samples)
        assert max(samples) - min(samples) > base / 10  # it really varies: never a fixed delay


@pytest.mark.parametrize("kwargs", [{"attempts": 0}, {"attempts": 1.5}, {"backoff": "cubic"}, {"delay": "-1s"},
                                    {"max_delay": math.nan}])
def test_bad_retry_policies_are_refused(kwargs: dict) -> None:
    with pytest.raises(JobsError) as err:
        Retry(**kwargs)
    assert err.value.code == "X_JOB_DECLARATION_INVALID"


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


def test_classification_reads_the_error() -> None:
    class Coded(Exception):
        def __init__(self, code: str, retry_after: float | None = None) -> None:
            self.code, self.retry_after = code, retry_after

    register_error_retry({"UNIT_TERMINAL": "terminal", "UNIT_LATER": "retry-after"})
    try:
        assert classify(Terminal("no")) == ("terminal", None)
        assert classify(RetryAfter(12)) == ("retry-after", 12.0)
        assert classify(Coded("UNIT_TERMINAL")) == ("terminal", None)
        assert classify(Coded("UNIT_LATER", 3)) == ("retry-after", 3.0)
        assert classify(Coded("UNCLASSIFIED")) == ("retryable", None)
        assert classify(ValueError("x")) == ("retryable", None)
    finally:
        _ERROR_CLASSES.pop("UNIT_TERMINAL")
        _ERROR_CLASSES.pop("UNIT_LATER")


def test_register_error_retry_refuses_unknown_classes() -> None:
    with pytest.raises(JobsError):
        register_error_retry({"X": "sometimes"})


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


def test_errors_show_code_cause_and_fix() -> None:
    err = JobsError("X_JOB_NOT_FOUND", "No job has the id 1.")
    assert str(err).startswith("[X_JOB_NOT_FOUND] No job has the id 1. Fix: ")
    with pytest.raises(ValueError):
        JobsError("X_NOT_A_CODE", "x")
