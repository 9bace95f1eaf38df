"""Fixtures for the webhook tests: the local receiver, and a webhook declared over in-memory
endpoint and event tables the test fills."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.http_receiver import Receiver
from ultimate_jobs import NO_TENANT, Retry, webhook
from ultimate_jobs.registry import unregister as _unregister
from ultimate_jobs.webhooks import ModelLedger

SECRET = "whsec-test-0123456789"


class Tables:
    """The app's endpoint and event rows, as ``endpoint()``/``event()`` read them."""

    def __init__(self) -> None:
        self.endpoints: dict[str, dict[str, Any]] = {}
        self.events: dict[str, dict[str, Any]] = {}

    def endpoint(self, endpoint_id: str, url: str, **extra: Any) -> str:
        self.endpoints[endpoint_id] = {"id": endpoint_id, "url": url, "secret": SECRET, **extra}
        return endpoint_id

    def event(self, event_id: str, topic: str = "invoice.paid", body: Any = None) -> str:
        self.events[event_id] = {"id": event_id, "topic": topic, "body": {"invoice": event_id} if body is None
                                 else body}
        return event_id


@pytest.fixture
def tables() -> Tables:
    return Tables()


@pytest.fixture
def declare_webhook(tables: Tables) -> Iterator[Callable[..., Any]]:
    names: list[str] = []

    def declare(name: str = "tests.webhooks.deliver", **options: Any) -> Any:
        options.setdefault("allow_private", True)
        options.setdefault("retry", Retry(attempts=3, delay="1s", jitter=False))
        handle = webhook(name=name, tenant=options.pop("tenant", NO_TENANT),
                         endpoint=lambda endpoint_id, **_: tables.endpoints.get(endpoint_id),
                         event=lambda event_id, **_: tables.events.get(event_id),
                         ledger=options.pop("ledger", ModelLedger()), **options)
        names.append(handle.name)
        return handle

    yield declare
    for name in names:
        _unregister(name)


__all__ = ["SECRET", "Receiver", "Tables"]
