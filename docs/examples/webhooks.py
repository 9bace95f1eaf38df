"""Webhooks, both halves: webhook() delivering to a partner's receiver (a real HTTP server on
127.0.0.1 in this script, which checks the signature with verify_webhook_signature), a 500 that is
retried, the ledger rows, an internal address refused; then webhook_receiver() taking a signed
event through Django's test client, a redelivery deduplicated, and a bad signature refused.

Outbound delivery needs httpx: pip install 'ultimate-jobs[webhooks]'.
Run it: python docs/examples/webhooks.py
"""

import atexit
import json
import tempfile
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import django
from django.conf import settings

TMP = tempfile.TemporaryDirectory()
atexit.register(TMP.cleanup)
settings.configure(
    INSTALLED_APPS=["ultimate_jobs"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": f"{TMP.name}/jobs.sqlite3"}},
    USE_TZ=True,
    ROOT_URLCONF="ultimate_jobs.urls",  # in a project: path("", include("ultimate_jobs.urls"))
    ALLOWED_HOSTS=["testserver"],
)
django.setup()

from ultimate_jobs import (  # noqa: E402
    NO_TENANT,
    JobsError,
    Retry,
    verify_webhook_signature,
    webhook,
    webhook_receiver,
)
from ultimate_jobs.webhooks import ModelLedger  # noqa: E402

SECRET = "whsec_partner_1"
answers = [500, 200]  # what the partner's receiver answers, in order (the last repeats)


class Partner(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        try:
            verify_webhook_signature(body, self.headers, SECRET)
            verdict = "signature ok"
        except JobsError as err:
            verdict = err.code
        status = answers.pop(0) if len(answers) > 1 else answers[0]
        print(f"  partner got {self.headers['X-Ultimate-Webhook-Topic']} {json.loads(body)} ({verdict}) -> {status}")
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


ENDPOINTS = {}  # the app's own endpoint and event tables, here dicts
EVENTS = {"evt_1": {"id": "evt_1", "topic": "invoice.paid", "body": {"invoice": "inv_42", "amount": 1999}}}

deliver = webhook(
    name="billing.webhooks", tenant=NO_TENANT,
    endpoint=lambda endpoint_id, **_: ENDPOINTS.get(endpoint_id),   # read on every attempt
    event=lambda event_id, **_: EVENTS.get(event_id),
    ledger=ModelLedger(), disable_after=10, timeout="10s",
    allow_private=True,  # only because the partner runs on 127.0.0.1 here
    retry=Retry(attempts=5, delay="1s", jitter=False))

strict = webhook(  # the same, as production runs it: internal addresses refused
    name="billing.webhooks.strict", tenant=NO_TENANT,
    endpoint=lambda endpoint_id, **_: ENDPOINTS.get(endpoint_id), event=lambda event_id, **_: EVENTS.get(event_id),
    ledger=ModelLedger())


def verify(inbound):
    verify_webhook_signature(inbound.body, inbound.headers, [SECRET, "whsec_old"])  # rotation: either
    return {"event_id": inbound.headers["X-Ultimate-Webhook-Id"], "payload": json.loads(inbound.body)}


handled = []
inbound = webhook_receiver(
    name="billing.inbound", path="hooks/billing/<str:account>/", tenant=NO_TENANT, verify=verify,
    handle=lambda *, event_id, payload, ctx: handled.append((event_id, payload)))


def main():
    from django.core.management import call_command
    from django.test import Client

    from ultimate_jobs import ops
    from ultimate_jobs.factories.webhook.signing import signature
    from ultimate_jobs.testing import drain, freeze_clock, run_job

    call_command("migrate", verbosity=0)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Partner)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    ENDPOINTS["ep_1"] = {"id": "ep_1", "url": f"http://127.0.0.1:{server.server_address[1]}/hooks",
                         "secret": SECRET}

    with freeze_clock(datetime(2026, 5, 4, 9, tzinfo=UTC)):
        print("outbound:")
        trace = run_job(deliver, endpoint_id="ep_1", event_id="evt_1")
        print("state:", trace.state, "result:", trace.result)
        for row in ops.get_job(trace.id)["webhook"]:
            print(f"  ledger: attempt {row['attempt']} status {row['status_code']} {row['error_code']}")
        refused = run_job(strict, endpoint_id="ep_1", event_id="evt_1")
        print("strict:", refused.state, refused.error_code, "plain http:", "plain http://" in refused.last_error)

        print("inbound:")
        body = json.dumps({"invoice": "inv_7"}).encode()
        t = int(datetime(2026, 5, 4, 9, tzinfo=UTC).timestamp())
        headers = {"HTTP_X_ULTIMATE_WEBHOOK_ID": "evt_7", "HTTP_X_ULTIMATE_WEBHOOK_TOPIC": "invoice.paid",
                   "HTTP_X_ULTIMATE_WEBHOOK_SIGNATURE": signature(SECRET, t=t, event_id="evt_7",
                                                                  topic="invoice.paid", body=body)}
        client = Client()
        for label in ("first", "redelivery"):
            answer = client.post("/hooks/billing/acme/", data=body, content_type="application/json", **headers)
            print(f"  {label}: {answer.status_code} {answer.json()}")
        forged = client.post("/hooks/billing/acme/", data=b'{"invoice": "inv_8"}', content_type="application/json",
                             **headers)
        print(f"  forged: {forged.status_code} {forged.json()}")
        drain()
        print("  handled:", handled)


if __name__ == "__main__":
    main()

# Output:
# outbound:
#   partner got invoice.paid {'invoice': 'inv_42', 'amount': 1999} (signature ok) -> 500
#   partner got invoice.paid {'invoice': 'inv_42', 'amount': 1999} (signature ok) -> 200
# state: done result: {'status': 200, 'endpoint_id': 'ep_1', 'event_id': 'evt_1', 'attempt': 2}
#   ledger: attempt 1 status 500 X_WEBHOOK_DELIVERY_FAILED
#   ledger: attempt 2 status 200 None
# strict: dead X_WEBHOOK_ENDPOINT_INVALID plain http: True
# inbound:
#   first: 200 {'ok': True, 'event_id': 'evt_7', 'deduped': False}
#   redelivery: 200 {'ok': True, 'event_id': 'evt_7', 'deduped': True}
#   forged: 401 {'ok': False, 'code': 'X_WEBHOOK_SIGNATURE_INVALID'}
#   handled: [('evt_7', {'invoice': 'inv_7'})]
