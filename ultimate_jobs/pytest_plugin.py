"""The pytest plugin of ``ultimate_jobs.testing``, loaded through the ``pytest11`` entry point.

Usage::

    @pytest.mark.django_db
    def test_nudge_after_three_days(jobs_clock, run_job, drain_jobs):
        assert run_job(onboard_org, org_id="acme").state == "suspended"
        jobs_clock.advance("3d")
        (trace,) = drain_jobs()
        assert trace.steps["nudge"].executions == 1

Fixtures: ``jobs_clock`` (the clock frozen at the test's start as a ``FrozenClock``; unfrozen
after), ``run_job``, ``drain_jobs``, ``crash_proof`` and ``record_effect`` (the helpers of
``ultimate_jobs.testing``). They need database access like any ORM code: mark the test
``django_db``. Nothing is imported from Django until a fixture is used: the plugin sits outside
the ``testing`` package because pytest loads it before Django is set up, and importing
``ultimate_jobs.testing`` loads the models.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest  # optional: only pytest loads this module, through its pytest11 entry point


@pytest.fixture
def jobs_clock() -> Iterator[Any]:
    """ultimate_jobs' clock (and every SQL ``now`` it sends), frozen at the current time."""
    from ultimate_jobs.testing import freeze_clock

    with freeze_clock() as frozen:
        yield frozen


@pytest.fixture
def run_job() -> Callable[..., Any]:
    from ultimate_jobs.testing import run_job as helper

    return helper


@pytest.fixture
def drain_jobs() -> Callable[..., Any]:
    from ultimate_jobs.testing import drain

    return drain


@pytest.fixture
def crash_proof() -> Callable[..., Any]:
    from ultimate_jobs.testing import crash_proof as helper

    return helper


@pytest.fixture
def record_effect() -> Callable[..., Any]:
    from ultimate_jobs.testing import record_effect as helper

    return helper
