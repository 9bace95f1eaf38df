"""Webhook delivery throughput against a local receiver (issue 16).

Usage::

    .venv/bin/python bench/webhooks.py                    # 2,000 deliveries, 2 workers x 10 threads
    .venv/bin/python bench/webhooks.py --n 5000 --workers 2 --concurrency 20

A ``ThreadingHTTPServer`` on 127.0.0.1 in this process answers every POST 200 (and checks nothing:
the point is the queue's and the delivery's own cost). ``--n`` deliveries of ``webhook()`` (each a
signed POST through httpx plus its ``WebhookDelivery`` ledger row) are enqueued untimed into a fresh
PostgreSQL database ``bench_uj_webhooks_<pid>`` (dropped at the end), then ``--workers`` real
``jobs_worker --roles worker`` processes start; the database is polled every 50 ms until every
delivery is ``done``. Reported: deliveries/s from spawn (start-up included) and from the first
delivery done ("steady"), and the requests the receiver counted.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("BENCH_UJ_DB", f"bench_uj_webhooks_{os.getpid()}")
os.environ["DJANGO_SETTINGS_MODULE"] = "bench.webhooks_settings"

import django  # noqa: E402

django.setup()

from bench import measure  # noqa: E402

received = [0]
lock = threading.Lock()


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with lock:
            received[0] += 1
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        return


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=10)
    args = parser.parse_args()

    measure.recreate_database()
    from bench.webhooks_app.jobs import deliver
    from ultimate_jobs.models import Job

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    deliver.enqueue_many([{"endpoint_id": f"ep_{i % 20}", "event_id": f"evt_{i}", "url": url}
                          for i in range(args.n)])
    env = {"DJANGO_SETTINGS_MODULE": "bench.webhooks_settings"}
    workers: list[subprocess.Popen[bytes]] = []
    try:
        start = time.monotonic()
        for k in range(args.workers):
            argv = measure.worker_argv(args.concurrency)
            argv[argv.index("bench.settings")] = "bench.webhooks_settings"
            log = open(measure.LOG_DIR / f"webhooks-worker-{k}.log", "ab")  # noqa: SIM115
            measure.LOG_DIR.mkdir(parents=True, exist_ok=True)
            workers.append(subprocess.Popen(argv, env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
                                            stdout=log, stderr=subprocess.STDOUT, cwd=str(measure.LOG_DIR)))
        first = None
        while True:
            done = Job.objects.filter(name=deliver.name, state="done").count()
            if done and first is None:
                first = (time.monotonic(), done)
            if done >= args.n:
                break
            if time.monotonic() - start > 600:
                raise SystemExit(f"only {done} of {args.n} deliveries done after 600 s")
            time.sleep(0.05)
        end = time.monotonic()
    finally:
        measure.stop_workers(workers)
        server.shutdown()
    from ultimate_jobs.models import WebhookDelivery

    rows = WebhookDelivery.objects.filter(status_code=200).count()
    measure.drop_database()
    assert first is not None
    print(f"deliveries: {args.n}, workers: {args.workers} x {args.concurrency} threads, "
          f"receiver got {received[0]} requests, ledger rows 200: {rows}")
    print(f"spawn -> last done: {end - start:.2f} s = {args.n / (end - start):.0f} deliveries/s")
    print(f"steady (first done -> last): {end - first[0]:.2f} s = {(args.n - first[1]) / (end - first[0]):.0f} "
          "deliveries/s")


if __name__ == "__main__":
    main()
