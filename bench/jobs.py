"""The benchmark's no-op job, discovered by ultimate_jobs like any app's ``jobs`` module.

Its first line reports the start time when asked: ``i >= 0`` sends ``"i time.time()"`` as one UDP
datagram to ``127.0.0.1:$BENCH_UDP_PORT`` (the pickup-latency listener); ``i < 0`` is a plain no-op.
Every enqueue passes a fresh ``seq``, so each is a new job and none takes the dedupe path.
"""

from __future__ import annotations

import os
import socket
import time

from ultimate_jobs import NO_TENANT, job

_sock: socket.socket | None = None


@job(name="bench.noop", idempotency_key="noop:{seq}", tenant=NO_TENANT)
def noop(ctx: object, *, i: int, seq: int) -> None:
    if i >= 0:
        report_start(i, time.time())


def report_start(i: int, started: float) -> None:
    global _sock
    port = os.environ.get("BENCH_UDP_PORT")
    if port:
        _sock = _sock or socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        _sock.sendto(f"{i} {started!r}".encode(), ("127.0.0.1", int(port)))
