"""The demo's jobs: discovered at startup, like every installed app's ``jobs`` module.

Each job names itself (a name is a durable queue key: declare one and keep it), says how it is
deduplicated (``idempotency_key``) and which shop it acts for (``tenant``). ``batch`` is part of
every key so each ``manage.py demo`` run enqueues fresh jobs instead of deduplicating into the
previous run's.
"""

from __future__ import annotations

import asyncio

from ultimate_jobs import NO_TENANT, Retry, job

# Retries without a wait, so `jobs_worker --burst` sees each retry as runnable at once.
# Real jobs keep the default exponential backoff (1s, 2s, 4s, ... with jitter).
IMMEDIATE_RETRY = Retry(attempts=3, backoff="fixed", delay=0, jitter=False)


@job(name="shop.send_receipt", queue="emails", idempotency_key="receipt:{batch}:{order_id}",
     tenant=lambda shop, **_: shop)
def send_receipt(ctx, *, shop: str, order_id: int, batch: str) -> dict:
    """Succeeds on the first attempt."""
    return {"to": f"customer-{order_id}@{shop}.example", "attempt": ctx.attempt}


@job(name="shop.charge_card", idempotency_key="charge:{batch}:{order_id}", tenant=lambda shop, **_: shop,
     retry=IMMEDIATE_RETRY)
def charge_card(ctx, *, shop: str, order_id: int, amount_cents: int, batch: str) -> dict:
    """Fails twice (a flaky gateway), then succeeds on the third and last attempt."""
    if ctx.attempt < 3:
        raise ConnectionError(f"payment gateway timed out (attempt {ctx.attempt})")
    return {"charged": amount_cents, "attempt": ctx.attempt}


@job(name="shop.sync_inventory", idempotency_key="inventory:{batch}:{sku}", tenant=lambda shop, **_: shop,
     retry=IMMEDIATE_RETRY)
def sync_inventory(ctx, *, shop: str, sku: str, batch: str) -> None:
    """Always fails: after its three attempts it is dead-lettered, error kept for the admin."""
    raise LookupError(f"warehouse has no SKU {sku!r}")


@job(name="shop.fetch_exchange_rate", idempotency_key="fx:{batch}:{currency}", tenant=NO_TENANT)
async def fetch_exchange_rate(ctx, *, currency: str, batch: str) -> dict:
    """An ``async def`` job: runs on the worker's event-loop thread."""
    await asyncio.sleep(0.05)
    return {"currency": currency, "per_eur": {"USD": 1.08, "GBP": 0.85}.get(currency, 1.0)}
