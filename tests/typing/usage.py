"""What a user's type checker learns from ultimate_jobs: checked by mypy in
tests/unit/test_typing.py, never run. An ``# expect:`` comment names what mypy must say on the
line below it (``builtins.`` left out of type names, as recent mypy prints them)."""

from __future__ import annotations

from typing import reveal_type

from ultimate_jobs import NO_TENANT, JobContext, job, ops


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
# expect: Revealed type is "list[TypedDict(ultimate_jobs.ops.types.JobStepInfo
reveal_type(ops.get_job("0190f0a4-7c9b-7c1e-8e6f-5a1b2c3d4e5f")["steps"])
# expect: Unexpected keyword argument "shop" for "enqueue"
send_receipt.enqueue(order_id=42, shop="acme")
# expect: Argument "order_id" to "enqueue" of "JobHandle" has incompatible type "str"; expected "int"
send_receipt.enqueue(order_id="42", shop_id="acme")
# expect: Missing named argument "shop_id" for "enqueue"
send_receipt.using(queue="emails").enqueue(order_id=42)
