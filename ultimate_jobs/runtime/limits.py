"""Internal: per-process limits (the ``LIMITS`` setting) — the fast path beside fleet slots.

Options (default: none of them): ``per_tenant`` (runs of one tenant in flight in this process),
``per_queue`` (runs of one queue in flight), ``global`` (runs in flight), ``rate_per_tenant``
(``{"limit": N, "window": "1s"}``: starts per tenant per window). Zero is a hard stop. Jobs with
no tenant are not counted against the tenant limits.

The claim statement is told which tenants are at their limit, so their jobs are not claimed
at all; a batch that still over-claims one tenant sheds the excess: the job goes straight
back to ``ready`` uncounted — a shed is not a suspension, and no ``last_error`` is written.
Per-tenant state is bounded: idle tenants are forgotten, and at most ``MAX_TRACKED_TENANTS``
rate windows are kept (the least throttled evicted first).

Logged events: ``jobs.worker.shed``.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Mapping
from typing import Any

MAX_TRACKED_TENANTS = 10_000


class ProcessLimits:
    def __init__(self, limits: Mapping[str, Any], *, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.per_tenant: int | None = limits.get("per_tenant")
        self.per_queue: int | None = limits.get("per_queue")
        self.global_cap: int | None = limits.get("global")
        rate = limits.get("rate_per_tenant")
        self.rate_limit: int | None = rate["limit"] if rate else None
        self.rate_window: float = rate["window"] if rate else 0.0
        self._monotonic = monotonic
        self._starts: dict[str, collections.deque[float]] = {}
        self._throttled: collections.Counter[str] = collections.Counter()

    @property
    def active(self) -> bool:
        return any(v is not None for v in (self.per_tenant, self.per_queue, self.global_cap, self.rate_limit))

    def tracked(self) -> int:
        return len(self._starts)

    def cap_slots(self, slots: dict[str, int], in_flight_by_queue: Mapping[str, int], in_flight: int) -> dict[str, int]:
        """Trim a pass's free slots by ``per_queue`` and ``global``."""
        out = dict(slots)
        if self.per_queue is not None:
            for queue in out:
                out[queue] = max(0, min(out[queue], self.per_queue - in_flight_by_queue.get(queue, 0)))
        if self.global_cap is not None:
            room = max(0, self.global_cap - in_flight)
            for queue in list(out):
                take = min(out[queue], room)
                out[queue], room = take, room - take
        return {q: n for q, n in out.items() if n > 0}

    def blocked_tenants(self, in_flight_by_tenant: Mapping[str, int]) -> list[str]:
        """Tenants the claim must skip: at their in-flight limit or out of rate."""
        blocked = set()
        if self.per_tenant is not None:
            blocked |= {t for t, n in in_flight_by_tenant.items() if n >= self.per_tenant}
        if self.rate_limit is not None:
            now = self._monotonic()
            for tenant in list(self._starts):
                if self._window(tenant, now) >= self.rate_limit:
                    blocked.add(tenant)
        return sorted(blocked)

    def admit(self, tenant: str | None, in_flight_by_tenant: Mapping[str, int]) -> bool:
        """Whether one more claimed run of ``tenant`` may start now; records the start when it may."""
        if tenant is None:
            return True
        if self.per_tenant is not None and in_flight_by_tenant.get(tenant, 0) >= self.per_tenant:
            self._throttled[tenant] += 1
            return False
        if self.rate_limit is not None:
            now = self._monotonic()
            if self._window(tenant, now) >= self.rate_limit:
                self._throttled[tenant] += 1
                return False
            self._starts.setdefault(tenant, collections.deque()).append(now)
            self._bound()
        return True

    def _window(self, tenant: str, now: float) -> int:
        starts = self._starts.get(tenant)
        if not starts:
            return 0
        while starts and now - starts[0] >= self.rate_window:
            starts.popleft()
        if not starts:
            del self._starts[tenant]  # an idle tenant holds no state
            self._throttled.pop(tenant, None)
            return 0
        return len(starts)

    def _bound(self) -> None:
        if len(self._starts) <= MAX_TRACKED_TENANTS:
            return
        by_throttle = sorted(self._starts, key=lambda t: self._throttled.get(t, 0))
        for tenant in by_throttle[: len(self._starts) - MAX_TRACKED_TENANTS]:
            del self._starts[tenant]
            self._throttled.pop(tenant, None)
