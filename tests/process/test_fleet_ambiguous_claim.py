"""A claim whose commit landed but whose answer never reached the worker (the connection died
between PostgreSQL's commit and the reply: a restart, a failover, a cut TCP session).

The worker cannot tell such a claim from one that rolled back, so it must find out: rows that
read ``running`` under its own worker id but that it does not hold are its own lost claims, and
its next pass hands them back uncounted (``jobs.claim.reconciled``). Without that they sat until
their lease lapsed, a whole visibility timeout later, and the lapse counted an attempt the body
never made, so a job on its final attempt was dead-lettered (``lease-lapsed``) without ever
having run. The chaos test first saw it after a PostgreSQL restart: two jobs claimed in the pass
the restart cut waited 30 s for their lease.

The cut is made deterministic with a small PostgreSQL wire-protocol proxy between the worker and
the server: it forwards everything, and once armed, watches for the first claim statement that
claims rows (recognised by its result columns); when the server then reports that transaction's
``COMMIT`` (a pass in a transaction) or that it is ready with no transaction open (an idle pass,
whose claim is sent alone in autocommit), it drops both sides of the connection instead of passing
the answer on: committed on the server, unknown to the worker.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import suppress

import pytest
from django.db import connection

from tests.app.jobs import record_once
from tests.app.models import Effect
from tests.process.conftest import Start, log_text, wait_until
from ultimate_jobs import ops
from ultimate_jobs.models import Job

pytestmark = [pytest.mark.process, pytest.mark.postgres_only]

SSL_REQUEST, GSS_REQUEST = 80877103, 80877104
CLAIM_COLUMNS = (b"concurrency_key\x00", b"traceparent\x00")  # only the claim statement returns both


class CommitCutProxy:
    """A TCP proxy to PostgreSQL that can lose the answer to one committed claim."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.armed = threading.Event()
        self.struck = threading.Event()
        self.claimed_rows = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._closed = True
        for sock in [self._listener, *self._sockets]:
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # wakes the threads blocked reading it
            with suppress(OSError):
                sock.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    @staticmethod
    def _read(sock: socket.socket, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    def _serve(self, client: socket.socket) -> None:
        server: socket.socket | None = None
        try:
            while True:  # the startup packet, after refusing SSL/GSS so the traffic stays readable
                length = struct.unpack("!I", self._read(client, 4))[0]
                body = self._read(client, length - 4)
                if struct.unpack("!I", body[:4])[0] in (SSL_REQUEST, GSS_REQUEST):
                    client.sendall(b"N")
                    continue
                break
            server = socket.create_connection(self.upstream)
            self._sockets += [client, server]
            server.sendall(struct.pack("!I", length) + body)
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()
            self._answers(server, client)
        except (OSError, ConnectionError):
            pass
        finally:
            for sock in (client, server):
                if sock is not None:
                    with suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)
                    sock.close()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        with suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with suppress(OSError):
            dst.shutdown(socket.SHUT_RDWR)

    def _answers(self, server: socket.socket, client: socket.socket) -> None:
        claiming = committing = False  # saw the claim's columns / it claimed rows, its COMMIT is due
        rows = 0
        while True:
            head = self._read(server, 5)
            kind, length = head[:1], struct.unpack("!I", head[1:])[0]
            message = head + self._read(server, length - 4)
            if kind == b"T" and self.armed.is_set() and all(column in message for column in CLAIM_COLUMNS):
                claiming = True
            elif kind == b"C":
                tag = message[5:].rstrip(b"\x00").decode()
                if claiming:
                    claiming = False
                    rows = int(tag.split()[1]) if tag.startswith("UPDATE ") else 0
                    committing = rows > 0  # nothing claimed: wait for a pass that claims
                elif committing and tag == "COMMIT":  # committed on the server: the worker never hears it
                    self._strike(rows)
                    return
            elif kind == b"Z" and committing and message[5:6] == b"I":
                # Ready, no transaction open: a claim sent alone (autocommit) committed before this.
                self._strike(rows)
                return
            client.sendall(message)

    def _strike(self, rows: int) -> None:
        self.claimed_rows = rows
        self.armed.clear()
        self.struck.set()


@pytest.fixture
def proxy(transactional_db: None) -> Iterator[CommitCutProxy]:
    settings = connection.settings_dict
    cut = CommitCutProxy((settings["HOST"] or "127.0.0.1", int(settings["PORT"] or 5432)))
    yield cut
    cut.close()


def test_a_claim_whose_commit_answer_was_lost_still_runs_its_jobs(started_worker: Start,
                                                                    proxy: CommitCutProxy) -> None:
    settings = connection.settings_dict
    url = f"postgres://{settings['USER']}@127.0.0.1:{proxy.port}/{settings['NAME']}"
    worker = started_worker("--concurrency", "4", env={"DATABASE_URL": url, "JOBS_TEST_VISIBILITY": "2s"})
    warm = record_once.enqueue(key="warm")  # through the proxy, before it is armed
    wait_until(lambda: Job.objects.filter(id=warm.id, state="done").exists(), timeout=20, procs=(worker,),
               what="a job through the proxy")

    proxy.armed.set()
    results = record_once.enqueue_many([{"key": f"lost-{n}"} for n in range(3)])
    ids = [r.id for r in results]
    wait_until(proxy.struck.is_set, timeout=20, procs=(worker,), what="a claim committed and its answer lost")
    wait_until(lambda: "jobs.worker.tick-failed" in log_text(worker), timeout=10, procs=(worker,),
               what="the worker saw the claim fail")
    # The claim did land: the rows read running, under this worker, though it holds none of them.
    claimed = Job.objects.filter(id__in=ids, state="running", claimed_by__contains=f":{worker.pid}:")
    assert claimed.count() == proxy.claimed_rows >= 1

    wait_until(lambda: not Job.objects.filter(id__in=ids, state__in=("ready", "running")).exists(),
               timeout=30, procs=(worker,), what="the jobs of the lost claim settled")
    jobs = [ops.get_job(job_id) for job_id in ids]
    assert [(j["state"], j["attempt"], j["stop_reason"]) for j in jobs] == [("done", 1, None)] * len(ids), (
        [(j["state"], j["attempt"], j["stop_reason"], j["last_error"]) for j in jobs])
    assert Effect.objects.filter(key__startswith="lost-").count() == len(ids)
    text = log_text(worker)
    assert "jobs.claim.reconciled" in text  # handed back by the worker itself ...
    assert "jobs.lease.rescued" not in text  # ... not left to lapse
    assert worker.proc.poll() is None and os.getpid() != worker.pid
