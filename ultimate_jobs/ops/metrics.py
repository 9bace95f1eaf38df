"""Prometheus metrics for the whole fleet, read from the database through ``ultimate_jobs.ops``.

Usage::

    # urls.py
    path("jobs/", include("ultimate_jobs.urls"))      # GET /jobs/metrics
    # settings.py: who may scrape (a logged-in user with ultimate_jobs.view_job may too)
    ULTIMATE_JOBS = {"METRICS_TOKEN": env("JOBS_METRICS_TOKEN")}   # Authorization: Bearer <token>

    from ultimate_jobs.ops.metrics import render
    body, content_type = render()                      # the exposition text, e.g. for another view

Options (default): ``METRICS_TOKEN`` (None: only staff with ``view_job`` may read the view).
Needs the ``metrics`` extra (``pip install ultimate-jobs[metrics]``: prometheus-client).

Series (each scrape reads them fresh; any web process can serve them, no worker needed):

- ``queue_depth{queue}`` gauge: jobs runnable now (ready, or delayed whose run_at passed);
- ``queue_demand{queue}`` gauge: the worker slots the queue wants now, runnable plus running jobs
  — what a worker autoscaler reads: depth alone falls to 0 while the slots are busy and would scale
  the workers that hold them away;
- ``queue_oldest_ready_seconds{queue}`` gauge: how long the oldest runnable job has waited (0
  when none) — alert when it passes your latency budget;
- ``queue_dead_jobs{queue}`` gauge: dead-lettered jobs kept (a queue that filled overnight and
  stopped growing shows here, where a counter's rate is flat);
- ``queue_jobs{queue,state}`` gauge: every row in exactly one state (``staged``: in the outbox);
- ``queue_paused{queue}`` gauge: 1 while paused;
- ``jobs_total{queue,outcome}`` counter: attempts settled (done, retried, failed, dead,
  interrupted, suspended, cancelled);
- ``job_leases_lost_total{queue}`` counter: runs whose worker lost the lease — at-least-once
  became twice; alert on any increase;
- ``worker_in_flight{worker}`` / ``worker_capacity{worker}`` gauges, ``workers_live`` gauge.

Logged events: none.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ultimate_jobs.ops.counters import counter_totals
from ultimate_jobs.ops.queues import queue_stats, workers

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class JobsCollector:
    """A prometheus-client collector: one ``collect()`` is three ``ops`` reads."""

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily  # optional: via render()

        stats = queue_stats()
        depth = GaugeMetricFamily("queue_depth", "Jobs runnable now (ready, or delayed and due).", labels=["queue"])
        demand = GaugeMetricFamily("queue_demand", "Worker slots the queue wants now: runnable plus running jobs.",
                                   labels=["queue"])
        oldest = GaugeMetricFamily("queue_oldest_ready_seconds", "Seconds the oldest runnable job has waited.",
                                   labels=["queue"])
        dead = GaugeMetricFamily("queue_dead_jobs", "Dead-lettered jobs kept.", labels=["queue"])
        states = GaugeMetricFamily("queue_jobs", "Jobs per state (every row in exactly one).",
                                   labels=["queue", "state"])
        paused = GaugeMetricFamily("queue_paused", "1 while the queue is paused.", labels=["queue"])
        for q in stats:
            depth.add_metric([q["queue"]], q["ready"])
            demand.add_metric([q["queue"]], q["ready"] + q["running"])
            oldest.add_metric([q["queue"]], q["oldest_ready_age"] or 0.0)
            dead.add_metric([q["queue"]], q["dead"])
            paused.add_metric([q["queue"]], 1 if q["paused"] else 0)
            for state in ("staged", "ready", "delayed", "running", "suspended", "done", "failed", "dead", "cancelled"):
                states.add_metric([q["queue"], state], q[state])
        yield from (depth, demand, oldest, dead, states, paused)

        settled = CounterMetricFamily("jobs", "Attempts settled, per queue and outcome.", labels=["queue", "outcome"])
        lost = CounterMetricFamily("job_leases_lost", "Runs whose worker lost the lease.", labels=["queue"])
        lost_queues = set()
        for row in counter_totals():
            if row["outcome"] == "lease-lost":
                lost.add_metric([row["queue"]], row["count"])
                lost_queues.add(row["queue"])
            else:
                settled.add_metric([row["queue"], row["outcome"]], row["count"])
        for q in stats:
            if q["queue"] not in lost_queues:
                lost.add_metric([q["queue"]], 0)  # present from the first scrape, so increase() sees the first loss
        yield from (settled, lost)

        live = [w for w in workers() if w["status"] == "alive"]  # not the presumed dead
        in_flight = GaugeMetricFamily("worker_in_flight", "Runs a live worker holds.", labels=["worker"])
        capacity = GaugeMetricFamily("worker_capacity", "Slots a live worker has.", labels=["worker"])
        for w in live:
            in_flight.add_metric([w["id"]], w["in_flight_count"])
            capacity.add_metric([w["id"]], w["slots"])
        yield from (in_flight, capacity, GaugeMetricFamily("workers_live", "Live workers.", value=len(live)))


def render() -> tuple[bytes, str]:
    """The exposition text of every series and its content type; raises ``ImportError`` without
    prometheus-client."""
    from prometheus_client import CollectorRegistry, generate_latest  # optional: the view answers 501 without it

    registry = CollectorRegistry(auto_describe=False)
    registry.register(JobsCollector())
    return generate_latest(registry), CONTENT_TYPE
