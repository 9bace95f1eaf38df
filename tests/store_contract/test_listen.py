"""``Store.listen``: a committed NOTIFY reaches the listener on PostgreSQL; SQLite answers None."""

from __future__ import annotations

import threading

import pytest

from tests.store_contract import covers
from tests.store_contract.plant import insert
from ultimate_jobs.db.listen import wait_until
from ultimate_jobs.db.store import JOBS_CHANNEL, Store


@pytest.mark.commits  # NOTIFY is delivered at commit
@covers("listen")
def test_a_committed_notify_wakes_the_listener(store: Store) -> None:
    woken: list[str] = []
    lock = threading.Lock()

    def on_wake(queue: str) -> None:
        with lock:
            woken.append(queue)

    listener = store.listen(channel=JOBS_CHANNEL, on_wake=on_wake, queues=["q"])
    if not store.supports_listen_notify:
        assert listener is None
        return
    assert listener is not None
    try:
        assert wait_until(lambda: "" in woken, timeout=10)  # the first poll after connecting
        store.queue_wake(queues=["elsewhere"])  # another queue: filtered out
        insert(store, key="wake")  # an insert without notify= wakes nobody
        store.queue_wake(queues=["q"])
        assert wait_until(lambda: "q" in woken, timeout=10)
        assert "elsewhere" not in woken
    finally:
        listener.stop()
    assert not listener.connected.is_set()
