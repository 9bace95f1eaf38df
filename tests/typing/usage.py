"""What a user's type checker learns from ultimate_jobs: checked by mypy in
tests/unit/test_typing.py, never run. An ``# expect:`` comment names what mypy must say on the
line below it (``builtins.`` left out of type names, as recent mypy prints them)."""

from __future__ import annotations

from typing import Any, TypeVar, reveal_type

from django.contrib.auth.models import Group, User

from ultimate_jobs import (
    NO_TENANT,
    BackfillBatch,
    JobContext,
    backfill,
    job,
    ops,
    purge,
    webhook,
    webhook_receiver,
)
from ultimate_jobs.handle import JobHandle
from ultimate_jobs.webhooks import ModelLedger

R = TypeVar("R")


@job(idempotency_key="receipt:{order_id}", tenant="{shop_id}")
def send_receipt(ctx: JobContext, *, order_id: int, shop_id: str) -> None:
    pass


@job(idempotency_key="sum:{a}:{b}", tenant=NO_TENANT)
async def add(ctx: JobContext, *, a: int, b: int) -> int:
    return a + b


# expect: Revealed type is "ultimate_jobs.enqueue.EnqueueResult"
reveal_type(send_receipt.enqueue(order_id=42, shop_id="acme"))
# expect: Revealed type is "ultimate_jobs.enqueue.EnqueueResult"
reveal_type(send_receipt.using(delay="10m").enqueue(order_id=43, shop_id="acme"))
# expect: Revealed type is "list[ultimate_jobs.enqueue.EnqueueResult]"
reveal_type(send_receipt.enqueue_many([{"order_id": 1, "shop_id": "acme"}]))
# expect: Revealed type is "ultimate_jobs.handle.JobHandle[[*, a: int, b: int], int]"
reveal_type(add)
# expect: Revealed type is "typing.Coroutine[Any, Any, ultimate_jobs.enqueue.EnqueueResult]"
reveal_type(send_receipt.aenqueue(order_id=42, shop_id="acme"))
# expect: Revealed type is "typing.Coroutine[Any, Any, list[ultimate_jobs.enqueue.EnqueueResult]]"
reveal_type(add.using(queue="math").aenqueue_many([{"a": 1, "b": 2}]))
# expect: Unexpected keyword argument "shop" for "aenqueue"
send_receipt.aenqueue(order_id=42, shop="acme")
# expect: Missing named argument "b" for "aenqueue" of "BoundJob"
add.using(delay="1s").aenqueue(a=1)
# expect: Revealed type is "list[TypedDict(ultimate_jobs.ops.types.JobStepInfo
reveal_type(ops.get_job("0190f0a4-7c9b-7c1e-8e6f-5a1b2c3d4e5f")["steps"])
# expect: Unexpected keyword argument "shop" for "enqueue"
send_receipt.enqueue(order_id=42, shop="acme")
# expect: Argument "order_id" to "enqueue" of "JobHandle" has incompatible type "str"; expected "int"
send_receipt.enqueue(order_id="42", shop_id="acme")
# expect: Missing named argument "shop_id" for "enqueue"
send_receipt.using(queue="emails").enqueue(order_id=42)


# The factories answer handles typed like @job's: the result a run answers (read here through
# result_of), and the input where it is fixed: none for a purge; a keyword-only input is "...", which
# mypy prints [*Any, **Any]. A backfill's handle gets its source's rows: another model's is refused.
def result_of(handle: JobHandle[..., R]) -> R:
    raise NotImplementedError


def activate(batch: BackfillBatch[User]) -> None:
    User.objects.filter(pk__in=[u.pk for u in batch.rows]).update(is_active=True)


def rename(batch: BackfillBatch[Group]) -> None:
    pass


def on_event(*, event_id: str, payload: Any, ctx: JobContext) -> int:
    return 1


class Sessions:
    def purge_expired(self, now: object) -> int:
        return 0


sweep = backfill(name="typing.sweep", tenant=NO_TENANT, source=lambda ctx: User.objects.filter(is_active=False),
                 handle=activate)
# expect: Revealed type is "ultimate_jobs.handle.JobHandle[…, TypedDict(ultimate_jobs.factories.backfill.sweep.Backfill
reveal_type(sweep)
# expect: Revealed type is "TypedDict(ultimate_jobs.factories.backfill.sweep.BackfillResult, {…'batches': int
reveal_type(result_of(sweep))
# expect: Cannot infer value of type parameter "M" of "backfill"
backfill(name="typing.mismatch", tenant=NO_TENANT, source=lambda ctx: User.objects.all(), handle=rename)
nightly = purge(name="typing.purge", targets=[Sessions()])
# expect: Revealed type is "ultimate_jobs.handle.JobHandle[[], TypedDict(ultimate_jobs.factories.purge.PurgeResult
reveal_type(nightly)
# expect: Unexpected keyword argument "now" for "enqueue" of "JobHandle"
nightly.enqueue(now="2026-01-01")
deliver = webhook(name="typing.webhook", tenant=NO_TENANT, endpoint=lambda **_: None, event=lambda **_: None,
                  ledger=ModelLedger())
# expect: Revealed type is "TypedDict(ultimate_jobs.factories.webhook.declaration.WebhookResult, {…'attempt': int
reveal_type(result_of(deliver))
# expect: Revealed type is "ultimate_jobs.handle.JobHandle[…, int]"
reveal_type(webhook_receiver(name="typing.inbound", path="hooks/typing/", tenant=NO_TENANT,
                             verify=lambda inbound: {"event_id": "1", "payload": None}, handle=on_event))
