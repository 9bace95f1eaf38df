"""Enqueues staged in the outbox are visible to the operator before the relay publishes them:
``ops.list_jobs(state="staged")`` / ``jobs ls --state staged`` list them, and ``ops.queue_stats()``
/ ``jobs stats`` count them per queue (as ``ops.get_job`` already answered ``staged``)."""

from __future__ import annotations

import json

import pytest
from django.db import transaction

from tests.app.jobs import noop, other_queue
from tests.cli import cli
from ultimate_jobs import ops
from ultimate_jobs.outbox import Relay

pytestmark = pytest.mark.django_db(transaction=True)


def stats_of(queue: str) -> dict:  # type: ignore[type-arg]
    return next(q for q in ops.queue_stats() if q["queue"] == queue)


def test_staged_enqueues_are_listed_and_counted_until_the_relay_publishes_them() -> None:
    with transaction.atomic():
        first, second = noop.enqueue_many([{"key": "staged-1"}, {"key": "staged-2"}])
        elsewhere = other_queue.enqueue(key="staged-other")
    noop.enqueue(key="published")  # a job row: never in the staged listing
    page = ops.list_jobs(state="staged")
    assert [(j["id"], j["state"], j["name"], j["queue"]) for j in page["jobs"]] == [
        (str(elsewhere.id), "staged", "tests.other_queue", "other"),
        (str(second.id), "staged", "tests.noop", "default"),
        (str(first.id), "staged", "tests.noop", "default")]
    assert page["jobs"][1]["payload"] == {"key": "staged-2"} and page["next"] is None
    assert [j["id"] for j in ops.list_jobs(state="staged", queue="other")["jobs"]] == [str(elsewhere.id)]
    assert [j["id"] for j in ops.list_jobs(state="staged", name="tests.noop", limit=1)["jobs"]] == [str(second.id)]
    assert ops.list_jobs(state="staged", name="tests.noop", after=str(second.id))["jobs"][0]["id"] == str(first.id)
    assert (stats_of("default")["staged"], stats_of("default")["ready"], stats_of("default")["total"]) == (2, 1, 3)
    assert stats_of("other")["staged"] == 1

    code, out, _ = cli("ls", "--state", "staged", "--json")
    assert code == 0 and [j["id"] for j in json.loads(out)["jobs"]] == [str(elsewhere.id), str(second.id),
                                                                          str(first.id)]
    code, out, _ = cli("ls", "--state", "staged", "--queue", "default")
    assert code == 0 and str(first.id) in out and str(elsewhere.id) not in out and "staged" in out
    code, out, _ = cli("stats")
    header = next(line for line in out.splitlines() if "queue" in line and "staged" in line)
    row = next(line for line in out.splitlines() if " default " in line)
    cells = {name.strip(): value.strip() for name, value in zip(header.split("\u2503"), row.split("\u2502"),
                                                                 strict=True)}
    assert code == 0 and (cells["queue"], cells["staged"], cells["ready"]) == ("default", "2", "1")
    code, out, _ = cli("stats", "--json")
    assert {q["queue"]: q["staged"] for q in json.loads(out)["queues"]}["default"] == 2

    assert Relay(relay_id="r-visible").run_once() == 3
    assert ops.list_jobs(state="staged")["jobs"] == []
    assert (stats_of("default")["staged"], stats_of("default")["ready"]) == (0, 3)
