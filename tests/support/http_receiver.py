"""A real HTTP receiver on 127.0.0.1 for the webhook tests: programmable answers, every request kept.

``Receiver.script`` is a list of answers consumed in order (the last one repeats): a status, or
``(status, headers)``, or ``("hang", seconds)`` to hold the connection before answering 200.

``Trickle`` (fixture ``trickle``) is the slow endpoint a hostile tenant points its webhook at: it
reads the request, then sends its response head one byte a second and never finishes it. Each
connection records when it was accepted and when the client hung up (``closed``), so a test reads
how long a delivery held its worker slot.
"""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float


@dataclass
class Receiver:
    server: ThreadingHTTPServer
    script: list[Any] = field(default_factory=lambda: [200])
    requests: list[Seen] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def next_answer(self) -> Any:
        with self.lock:
            return self.script.pop(0) if len(self.script) > 1 else self.script[0]


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's spelling
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen = Seen(self.path, {k: v for k, v in self.headers.items()}, body, time.time())
            with receiver.lock:
                receiver.requests.append(seen)
            answer = receiver.next_answer()
            headers: dict[str, str] = {}
            if isinstance(answer, tuple) and answer[0] == "hang":
                time.sleep(answer[1])
                answer = 200
            if isinstance(answer, tuple):
                answer, headers = answer
            self.send_response(answer)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
            return

    return Handler


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    server.daemon_threads = True
    rec = Receiver(server)
    server.RequestHandlerClass = _handler(rec)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield rec
    server.shutdown()
    server.server_close()


@dataclass
class Connection:
    accepted: float
    request: bytes = b""
    closed: float | None = None

    @property
    def held(self) -> float | None:
        return None if self.closed is None else self.closed - self.accepted


@dataclass
class Trickle:
    sock: socket.socket
    interval: float = 1.0
    give_up: float = 600.0
    connections: list[Connection] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def serve(self) -> None:
        self.sock.settimeout(0.2)  # so the teardown's stop is seen
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            seen = Connection(accepted=time.monotonic())
            with self.lock:
                self.connections.append(seen)
            threading.Thread(target=self._drip, args=(conn, seen), daemon=True).start()

    def _drip(self, conn: socket.socket, seen: Connection) -> None:
        head = b"HTTP/1.1 200 OK\r\nX-Slow: " + b"z" * 100_000
        with conn:
            conn.settimeout(5)
            try:  # the request: its head and whatever body came with it
                while b"\r\n\r\n" not in seen.request:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    seen.request += chunk
            except OSError:
                pass
            started = time.monotonic()
            for byte in head:
                if self.stopping.is_set() or time.monotonic() - started > self.give_up:
                    return
                try:
                    conn.sendall(bytes([byte]))
                    readable, _, _ = select.select([conn], [], [], self.interval)
                    if readable and not conn.recv(65536):  # the client hung up
                        break
                except OSError:
                    break
            seen.closed = time.monotonic()


@pytest.fixture
def trickle() -> Iterator[Trickle]:
    """A slow endpoint: one response-head byte a second, never a whole head."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    slow = Trickle(sock)
    thread = threading.Thread(target=slow.serve, daemon=True)
    thread.start()
    yield slow
    slow.stopping.set()
    thread.join(5)
    sock.close()
