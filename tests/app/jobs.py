"""Module-level jobs the suite runs (discovered like any app's jobs.py)."""

from __future__ import annotations

import asyncio
import os
import time

from django.db import transaction

from ultimate_jobs import NO_TENANT, Retry, RetryAfter, Terminal, job

from .models import Effect


@job(name="tests.noop", idempotency_key="{key}", tenant=NO_TENANT)
def noop(ctx, *, key: str) -> dict:
    return {"key": key, "attempt": ctx.attempt}


@job(name="tests.tenant_noop", idempotency_key="{key}", tenant="{org}")
def tenant_noop(ctx, *, key: str, org: str) -> None:
    return None


@job(name="tests.record", idempotency_key="record:{key}", tenant=NO_TENANT, retry=Retry(attempts=3, delay="50ms"))
def record(ctx, *, key: str, sleep: float = 0.0) -> str:
    if sleep:
        time.sleep(sleep)
    Effect.objects.create(key=key, job_id=ctx.job_id, attempt=ctx.attempt, pid=os.getpid())
    return key


@job(name="tests.flaky", idempotency_key="flaky:{key}", tenant=NO_TENANT,
     retry=Retry(attempts=5, backoff="fixed", delay=0, jitter=False))
def flaky(ctx, *, key: str, failures: int) -> dict:
    if ctx.attempt <= failures:
        raise RuntimeError(f"flaky failure {ctx.attempt} of {failures}")
    return {"succeeded_on": ctx.attempt}


@job(name="tests.always_fails", idempotency_key="fails:{key}", tenant=NO_TENANT,
     retry=Retry(attempts=3, backoff="fixed", delay=0, jitter=False))
def always_fails(ctx, *, key: str) -> None:
    raise ValueError(f"always fails (attempt {ctx.attempt})")


@job(name="tests.no_dead_letter", idempotency_key="ndl:{key}", tenant=NO_TENANT,
     retry=Retry(attempts=2, delay=0, dead_letter=False))
def no_dead_letter(ctx, *, key: str) -> None:
    raise ValueError("dropped")


@job(name="tests.terminal", idempotency_key="terminal:{key}", tenant=NO_TENANT, retry=5)
def terminal(ctx, *, key: str) -> None:
    raise Terminal("the card was declined")


class CodedError(Exception):
    def __init__(self, code: str, retry_after: float | None = None) -> None:
        super().__init__(f"coded failure {code}")
        self.code = code
        self.retry_after = retry_after


@job(name="tests.coded", idempotency_key="coded:{key}", tenant=NO_TENANT,
     retry=Retry(attempts=4, delay="1s", max_delay="10s", jitter=False))
def coded(ctx, *, key: str, code: str, retry_after: float | None = None) -> None:
    raise CodedError(code, retry_after)


@job(name="tests.retry_after", idempotency_key="ra:{key}", tenant=NO_TENANT,
     retry=Retry(attempts=3, max_delay="60s"))
def retry_after(ctx, *, key: str, seconds: float) -> None:
    raise RetryAfter(seconds)


@job(name="tests.slow", idempotency_key="slow:{key}", tenant=NO_TENANT, retry=Retry(attempts=3, delay=0))
def slow(ctx, *, key: str, seconds: float) -> str:
    """Sleeps cooperatively; records its start so a test can see how often it began."""
    Effect.objects.create(key=f"start:{key}", job_id=ctx.job_id, attempt=ctx.attempt, pid=os.getpid())
    if ctx.cancelled.wait(seconds):
        ctx.cancelled.check()
    Effect.objects.create(key=f"done:{key}", job_id=ctx.job_id, attempt=ctx.attempt, pid=os.getpid())
    return key


@job(name="tests.timeboxed", idempotency_key="tb:{key}", tenant=NO_TENANT, timeout="200ms",
     retry=Retry(attempts=2, delay=0))
def timeboxed(ctx, *, key: str) -> None:
    ctx.cancelled.wait(5)
    ctx.cancelled.check()


@job(name="tests.async_double", idempotency_key="async:{n}", tenant=NO_TENANT)
async def async_double(ctx, *, n: int) -> int:
    await asyncio.sleep(0)
    return n * 2


@job(name="tests.bad_result", idempotency_key="bad:{key}", tenant=NO_TENANT)
def bad_result(ctx, *, key: str) -> object:
    return object()


@job(name="tests.other_queue", idempotency_key="{key}", tenant=NO_TENANT, queue="other")
def other_queue(ctx, *, key: str) -> str:
    return key


# -- tests/process: jobs run by real worker processes -----------------------------------------------


@job(name="tests.async_pid", idempotency_key="async-pid:{key}", tenant=NO_TENANT)
async def async_pid(ctx, *, key: str, seconds: float = 0.0) -> dict:
    """An ``async def`` body: awaits ``seconds``, answers where and when it ran (for overlap checks)."""
    started = time.time()
    await asyncio.sleep(seconds)
    return {"key": key, "pid": os.getpid(), "started": started, "finished": time.time(),
            "attempt": ctx.attempt}


@job(name="tests.record_once", idempotency_key="record-once:{key}", tenant=NO_TENANT, retry=1)
def record_once(ctx, *, key: str) -> str:
    """Like ``tests.record`` with a single attempt: any failed attempt dead-letters it."""
    Effect.objects.create(key=key, job_id=ctx.job_id, attempt=ctx.attempt, pid=os.getpid())
    return key


if os.environ.get("JOBS_TEST_DEPLOY_EXTRA") == "1":
    # A second deployment: registered only in worker processes started with JOBS_TEST_DEPLOY_EXTRA=1,
    # so the suite's other workers (and the test process) do not have this job's code.

    @job(name="tests.extra.slow_no_dead_letter", idempotency_key="extra-ndl:{key}", tenant=NO_TENANT,
         retry=Retry(attempts=1, dead_letter=False))
    def extra_slow_no_dead_letter(ctx, *, key: str, seconds: float) -> str:
        Effect.objects.create(key=f"start:{key}", job_id=ctx.job_id, attempt=ctx.attempt, pid=os.getpid())
        if ctx.cancelled.wait(seconds):
            ctx.cancelled.check()
        return key


@job(name="tests.tick", idempotency_key="{task}", tenant=NO_TENANT)
def tick(ctx, *, task: str) -> str:
    """What the scheduler process tests' tasks enqueue."""
    return task


# Scheduled tasks only for the scheduler process tests (JOBS_TEST_TASKS=1): every jobs_worker
# process runs the scheduler role, so tasks declared here unconditionally would fire into the
# other process tests' databases.
if os.environ.get("JOBS_TEST_TASKS") == "1":
    from . import scheduled  # noqa: F401


@job(name="tests.fan_out", idempotency_key="fan:{key}", tenant=NO_TENANT)
def fan_out(ctx, *, key: str, children: int) -> int:
    """Enqueues its follow-up jobs inside a transaction, as a view would: they are staged."""
    with transaction.atomic():
        results = record.enqueue_many([{"key": f"{key}-{n}"} for n in range(children)])
    assert all(r.staged for r in results)
    return children


# -- tests/process/test_fleet_*.py, tests/chaos and scripts/soak.py ----------------------------------
# (Concurrency is imported here, not at the top, so this block stays a plain append.)

from ultimate_jobs import Concurrency  # noqa: E402


@job(name="tests.fleet.serial", idempotency_key="serial:{key}", tenant=NO_TENANT, concurrency=1,
     retry=Retry(attempts=3, delay=0))
def fleet_serial(ctx, *, key: str, seconds: float = 0.15) -> dict:
    """``concurrency=1`` across the fleet: answers when and where its body ran, for an overlap check."""
    started = time.time()
    Effect.objects.create(key=f"serial:{key}", job_id=ctx.job_id, attempt=ctx.attempt, pid=os.getpid())
    time.sleep(seconds)
    return {"key": key, "pid": os.getpid(), "started": started, "finished": time.time()}


def _released(key: str, ctx, limit: float) -> bool:
    """Wait (cooperatively) until the test writes ``release:<key>``; answer whether it did."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if Effect.objects.filter(key=f"release:{key}").exists():
            return True
        if ctx.cancelled.wait(0.05):
            ctx.cancelled.check()
    return False


@job(name="tests.fleet.keyed_fail", idempotency_key="kf:{key}", tenant=NO_TENANT,
     concurrency=Concurrency(key="{account}", limit=1, when_busy="fail"), retry=Retry(attempts=3, delay=0))
def fleet_keyed_fail(ctx, *, key: str, account: str, hold: float = 0.0) -> str:
    """One run per account across the fleet, a busy account fails the run; holds its key until released."""
    Effect.objects.create(key=f"start:{key}", job_id=ctx.job_id, attempt=ctx.attempt, pid=os.getpid())
    if hold:
        _released(key, ctx, hold)
    Effect.objects.create(key=f"done:{key}", job_id=ctx.job_id, attempt=ctx.attempt, pid=os.getpid())
    return key


@job(name="tests.fleet.cancellable", idempotency_key="cx:{key}", tenant=NO_TENANT,
     retry=Retry(attempts=3, delay=0))
def fleet_cancellable(ctx, *, key: str, seconds: float, obey: bool = True) -> str:
    """Waits on ``ctx.cancelled``; ``obey=False`` ignores the cancel and finishes its effects anyway."""
    Effect.objects.create(key=f"start:{key}", job_id=ctx.job_id, attempt=ctx.attempt, pid=os.getpid())
    cancelled = ctx.cancelled.wait(seconds)
    if obey and cancelled:
        ctx.cancelled.check()
    Effect.objects.create(key=f"after:{key}", job_id=ctx.job_id, attempt=ctx.attempt, pid=os.getpid())
    return key


@job(name="tests.fleet.self_kill", idempotency_key="sk:{key}", tenant=NO_TENANT,
     retry=Retry(attempts=2, delay=0))
def fleet_self_kill(ctx, *, key: str) -> None:
    """Kills its own worker process on every attempt (a segfaulting C extension, an OOM kill)."""
    Effect.objects.create(key=f"start:{key}", job_id=ctx.job_id, attempt=ctx.attempt, pid=os.getpid())
    os._exit(1)


@job(name="tests.fleet.long", idempotency_key="long:{key}", tenant=NO_TENANT, timeout="120s",
     retry=Retry(attempts=3, delay=0))
def fleet_long(ctx, *, key: str, seconds: float) -> dict:
    """Runs for longer than the visibility timeout (but well within its own timeout), cooperatively."""
    Effect.objects.create(key=f"start:{key}", job_id=ctx.job_id, attempt=ctx.attempt, pid=os.getpid())
    if ctx.cancelled.wait(seconds):
        ctx.cancelled.check()
    Effect.objects.create(key=f"done:{key}", job_id=ctx.job_id, attempt=ctx.attempt, pid=os.getpid())
    return {"pid": os.getpid(), "attempt": ctx.attempt}


@job(name="tests.chaos.effect", idempotency_key="chaos:{key}", tenant=NO_TENANT,
     retry=Retry(attempts=10, delay="200ms", max_delay="2s"))
def chaos_effect(ctx, *, key: str, sleep: float = 0.0) -> str:
    """One committed effect per execution (step-less, at-least-once): the chaos and soak ledgers."""
    if sleep:
        time.sleep(sleep)
    Effect.objects.create(key=key, job_id=ctx.job_id, attempt=ctx.attempt, pid=os.getpid())
    return key


@job(name="tests.fleet.overrun", idempotency_key="overrun:{key}", tenant=NO_TENANT, timeout="1s",
     concurrency=Concurrency(key="{group}", limit=1), retry=Retry(attempts=1))
def fleet_overrun(ctx, *, key: str, group: str, seconds: float = 0.0) -> str:
    """Holds its group's only fleet slot; ignores ``ctx.cancelled`` and runs on past its timeout."""
    Effect.objects.create(key=f"start:{key}", job_id=ctx.job_id, attempt=ctx.attempt, pid=os.getpid())
    time.sleep(seconds)  # deaf to the cancel token, as a blocking C call or a third-party client is
    Effect.objects.create(key=f"end:{key}", job_id=ctx.job_id, attempt=ctx.attempt, pid=os.getpid())
    return key


@job(name="tests.soak.steps", idempotency_key="soak:{key}", tenant=NO_TENANT,
     retry=Retry(attempts=10, delay="100ms", max_delay="2s"))
def soak_steps(ctx, *, key: str, pause: float = 0.0) -> str:
    """scripts/soak.py's job: three durable steps, each writing one ``Effect`` named ``<key>:<step>``.

    ``reserve`` and ``notify`` are ``atomic``: the effect commits with the step's checkpoint, so
    each must exist exactly once. ``charge`` is not: a crash between its write and its checkpoint
    re-runs it (at-least-once), which the soak counts as a duplicate execution.
    """

    def effect(step: str):  # noqa: ANN202
        def write() -> int:
            if pause:
                time.sleep(pause)
            return Effect.objects.create(key=f"{key}:{step}", job_id=ctx.job_id, attempt=ctx.attempt,
                                         pid=os.getpid()).id
        return write

    ctx.step.run("reserve", effect("reserve"), atomic=True)
    ctx.step.run("charge", effect("charge"))
    ctx.step.run("notify", effect("notify"), atomic=True)
    return key


# -- backfills the process tests sweep ----------------------------------------------------------
from django.db.models import CharField, Value  # noqa: E402
from django.db.models.functions import Cast, Concat  # noqa: E402

from ultimate_jobs import backfill  # noqa: E402

from .models import Post  # noqa: E402


def fill_slugs(batch) -> None:
    """Idempotent: only rows still without a slug are written; one Effect per row handled. The write
    and its Effects commit together, so a kill between them cannot leave a row handled unrecorded."""
    ids = [post.pk for post in batch.rows]
    with transaction.atomic():
        Post.objects.filter(pk__in=ids, slug="").update(slug=Concat(Value("post-"), Cast("id", CharField())))
        Effect.objects.bulk_create([Effect(key=f"slug:{pk}", job_id=batch.ctx.job_id, attempt=batch.ctx.attempt,
                                           pid=os.getpid()) for pk in ids])


slug_backfill = backfill(name="tests.backfill.slugs", tenant=NO_TENANT, source=lambda ctx: Post.objects.filter(slug=""),
                         handle=fill_slugs, count=lambda ctx: Post.objects.filter(slug="").count(), batch=100,
                         rate=float(os.environ.get("TEST_BACKFILL_RATE", "1000")),
                         atomic=os.environ.get("TEST_BACKFILL_ATOMIC") == "1",
                         retry=Retry(attempts=5, delay="50ms"))


@job(name="tests.coded_nul", idempotency_key="coded-nul:{key}", tenant=NO_TENANT, retry=1)
def coded_nul(ctx, *, key: str) -> None:
    raise CodedError(f"X_NUL\x00{key.upper()}")  # a payload cannot carry a NUL; an exception can


# Job modules a process test names (comma-separated dotted paths), declared in its workers too.
for _module in filter(None, os.environ.get("JOBS_TEST_MODULES", "").split(",")):
    __import__(_module)
