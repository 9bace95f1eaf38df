import math
import random
from datetime import timedelta

import pytest

from ultimate_jobs import JobsError, Retry, RetryAfter, Terminal, register_error_retry, retry_schedule
from ultimate_jobs.durations import to_seconds
from ultimate_jobs.retry import _ERROR_CLASSES, classify


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


def test_errors_show_code_cause_and_fix() -> None:
    err = JobsError("X_JOB_NOT_FOUND", "No job has the id 1.")
    assert str(err).startswith("[X_JOB_NOT_FOUND] No job has the id 1. Fix: ")
    with pytest.raises(ValueError):
        JobsError("X_NOT_A_CODE", "x")
