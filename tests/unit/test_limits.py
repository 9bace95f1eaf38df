"""Per-process limits: caps, blocked tenants, rate windows and bounded per-tenant state."""

from ultimate_jobs.runtime import limits as limits_module
from ultimate_jobs.runtime.limits import ProcessLimits


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_per_queue_and_global_trim_a_pass() -> None:
    limits = ProcessLimits({"per_queue": 3, "global": 4})
    assert limits.cap_slots({"a": 5, "b": 5}, {"a": 1}, 1) == {"a": 2, "b": 1}
    assert ProcessLimits({"global": 0}).cap_slots({"a": 5}, {}, 0) == {}  # zero is a hard stop


def test_tenants_at_their_limit_are_blocked_and_admission_rechecks() -> None:
    limits = ProcessLimits({"per_tenant": 2})
    assert limits.blocked_tenants({"acme": 2, "globex": 1}) == ["acme"]
    assert limits.admit("globex", {"globex": 1}) is True
    assert limits.admit("globex", {"globex": 2}) is False
    assert limits.admit(None, {}) is True  # jobs without a tenant are not counted


def test_rate_per_tenant_is_a_sliding_window() -> None:
    clock = Clock()
    limits = ProcessLimits({"rate_per_tenant": {"limit": 2, "window": 1.0}}, monotonic=clock)
    assert limits.admit("acme", {}) and limits.admit("acme", {})
    assert limits.admit("acme", {}) is False
    assert limits.blocked_tenants({}) == ["acme"]
    clock.now += 1.0
    assert limits.blocked_tenants({}) == []
    assert limits.tracked() == 0  # an idle tenant's window is forgotten


def test_per_tenant_state_is_bounded(monkeypatch) -> None:
    monkeypatch.setattr(limits_module, "MAX_TRACKED_TENANTS", 50)
    limits = ProcessLimits({"rate_per_tenant": {"limit": 1, "window": 60.0}}, monotonic=Clock())
    for n in range(500):
        limits.admit(f"t{n}", {})
    assert limits.tracked() <= 50
