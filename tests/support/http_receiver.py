"""A real HTTP receiver on 127.0.0.1 for the webhook tests: programmable answers, every request kept.

``Receiver.script`` is a list of answers consumed in order (the last one repeats): a status, or
``(status, headers)``, or ``("hang", seconds)`` to hold the connection before answering 200.
"""

from __future__ import annotations

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
