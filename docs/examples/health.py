"""``python manage.py jobs health``: the probe a Kubernetes exec probe or a systemd check runs.
Exit 0 when the jobs databases answer and the workers are alive, 1 with the reason otherwise.

Run it: python docs/examples/health.py
"""

import atexit
import json
import socket
import tempfile
import threading
import time

import django
from django.conf import settings

TMP = tempfile.TemporaryDirectory()
atexit.register(TMP.cleanup)
settings.configure(
    INSTALLED_APPS=["ultimate_jobs"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": f"{TMP.name}/jobs.sqlite3",
                           "OPTIONS": {"timeout": 30}}},
    USE_TZ=True,
)
django.setup()

from ultimate_jobs import Worker  # noqa: E402


def probe(*args: str) -> tuple[int, dict]:
    """``python manage.py jobs health --json ARGS``: its exit code and its JSON answer."""
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    try:
        call_command("jobs", "health", "--json", *args, stdout=out)
        code = 0
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    return code, json.loads(out.getvalue())


def main() -> None:
    from django.core.management import call_command

    from ultimate_jobs import ops

    call_command("migrate", verbosity=0)
    code, report = probe()
    print("no worker yet:", code, report["ok"], [d["alias"] for d in report["databases"] if d["ok"]])
    code, report = probe("--worker", socket.gethostname())
    print("--worker <this host>, none running:", code, report["reasons"][0].split(" whose")[0])

    worker = Worker(queues=["default"])
    thread = threading.Thread(target=worker.run, kwargs={"install_signals": False})
    thread.start()
    while not ops.workers():  # the worker's first pass writes its presence row
        time.sleep(0.05)
    code, report = probe("--worker", socket.gethostname())
    print("--worker <this host>, one running:", code, [w["verdict"] for w in report["workers"]])
    worker.stop()
    thread.join()
    print("after a clean stop (the row is deleted):", probe("--worker", socket.gethostname())[0])


if __name__ == "__main__":
    main()

# Output:
# no worker yet: 0 True ['default']
# --worker <this host>, none running: 1 no live worker
# --worker <this host>, one running: 0 ['alive']
# after a clean stop (the row is deleted): 1
