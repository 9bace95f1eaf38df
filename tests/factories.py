"""factory-boy factories: a job row in any state, written straight to the table.

The state implies the other columns (a running row has an owner, a claim and a lease; a dead
one an error and a finish time), so a test can set up what it reads without running a worker.
"""

from __future__ import annotations

from datetime import timedelta
from uuid import uuid4

import factory
from factory.django import DjangoModelFactory

from ultimate_jobs import clock
from ultimate_jobs.ids import uuid7


def _now() -> object:
    return clock.now()


class JobFactory(DjangoModelFactory):
    class Meta:
        model = "ultimate_jobs.Job"

    id = factory.LazyFunction(uuid7)
    run_id = factory.LazyFunction(uuid7)
    name = "tests.noop"
    queue = "default"
    state = "ready"
    payload = factory.LazyAttribute(lambda o: {"key": o.idempotency_key})
    idempotency_key = factory.Sequence(lambda n: f"key-{n}")
    max_attempts = 3
    run_at = factory.LazyFunction(_now)
    created_at = factory.LazyFunction(_now)
    updated_at = factory.LazyFunction(_now)

    class Params:
        running = factory.Trait(
            state="running", attempt=1, claimed_by="w-test", claim=factory.LazyFunction(uuid4),
            started_at=factory.LazyFunction(_now),
            visible_at=factory.LazyFunction(lambda: clock.now() + timedelta(seconds=30)))
        dead = factory.Trait(
            state="dead", attempt=3, error_code="X_TEST", last_error="RuntimeError: it broke",
            stop_reason="attempts-exhausted", started_at=factory.LazyFunction(_now),
            finished_at=factory.LazyFunction(_now))
        delayed = factory.Trait(state="delayed", run_at=factory.LazyFunction(lambda: clock.now() + timedelta(hours=1)))
        done = factory.Trait(state="done", attempt=1, result={"ok": True}, finished_at=factory.LazyFunction(_now))


class JobStepFactory(DjangoModelFactory):
    class Meta:
        model = "ultimate_jobs.JobStep"

    name = factory.Sequence(lambda n: f"step-{n}")
    status = "completed"
    executions = 1
    seq = factory.Sequence(lambda n: n)
    started_at = factory.LazyFunction(_now)
    completed_at = factory.LazyFunction(_now)
