"""Settings: ultimate_jobs reads one dict, ULTIMATE_JOBS, through one accessor; every value is
validated, and a bad one is refused naming the key (manage.py check reports it too).

Run it: python docs/examples/configure.py
"""

import atexit
import tempfile
import textwrap

import django
from django.conf import settings

TMP = tempfile.TemporaryDirectory()
atexit.register(TMP.cleanup)
settings.configure(
    INSTALLED_APPS=["ultimate_jobs"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": f"{TMP.name}/jobs.sqlite3"}},
    USE_TZ=True,
    ULTIMATE_JOBS={
        "QUEUES": ["default", "emails"],
        "CONCURRENCY": {"default": 8, "emails": 2},
        "VISIBILITY_TIMEOUT": "60s",      # durations: "250ms", "30s", "10m", "3h", "3d", timedelta, seconds
        "POLL_INTERVAL": "100ms",
        "REDACT_KEYS": ["password", "iban"],
    },
)
django.setup()

from ultimate_jobs import JobsError  # noqa: E402


def main() -> None:
    from django.core import checks
    from django.test import override_settings

    from ultimate_jobs.conf import get_settings

    conf = get_settings()
    print("queues:", conf.QUEUES, "| concurrency:", conf.CONCURRENCY)
    print("visibility:", conf.VISIBILITY_TIMEOUT, "| heartbeat (a third):", conf.HEARTBEAT_INTERVAL)
    print("poll:", conf.POLL_INTERVAL, "| idle poll max:", conf.IDLE_POLL_MAX, "| drain:", conf.DRAIN_TIMEOUT)
    print("redact:", conf.REDACT_KEYS, "| max payload:", conf.MAX_PAYLOAD_BYTES)

    for bad in ({"VISIBILITY_TIMEOUT": "soon"}, {"OUTBOX": "sometimes"}, {"CONCURENCY": 4},
                {"VISIBILITY_TIMEOUT": "30s", "HEARTBEAT_INTERVAL": "1m"}):
        with override_settings(ULTIMATE_JOBS=bad):
            try:
                get_settings()
            except JobsError as err:
                print("refused:", err.code)
                print(textwrap.fill(err.cause, 96, initial_indent="  ", subsequent_indent="  "))
            print("  manage.py check:", [m.id for m in checks.run_checks()])

    # Behind a transaction-mode pooler, LISTEN goes to an alias reaching the database directly.
    print("wake probe every:", conf.WAKE_PROBE_INTERVAL, "| listen databases:", dict(conf.LISTEN_DATABASES))
    with override_settings(ULTIMATE_JOBS={"LISTEN_DATABASES": {"default": "default_direct"}}):
        print("LISTEN_DATABASES to an alias missing from DATABASES:",
              [(m.id, m.msg) for m in checks.run_checks() if m.id.startswith("ultimate_jobs")])


if __name__ == "__main__":
    main()

# Output:
# queues: ('default', 'emails') | concurrency: {'default': 8, 'emails': 2}
# visibility: 60.0 | heartbeat (a third): 20.0
# poll: 0.1 | idle poll max: 2.0 | drain: 25.0
# redact: ('password', 'iban') | max payload: 1048576
# refused: X_CONFIG_INVALID
#   ULTIMATE_JOBS['VISIBILITY_TIMEOUT']='soon' is not a duration.
#   manage.py check: ['ultimate_jobs.E001']
# refused: X_CONFIG_INVALID
#   ULTIMATE_JOBS['OUTBOX']='sometimes' is not "auto" or "required".
#   manage.py check: ['ultimate_jobs.E001']
# refused: X_CONFIG_INVALID
#   ULTIMATE_JOBS has unknown key(s) CONCURENCY.
#   manage.py check: ['ultimate_jobs.E001']
# refused: X_CONFIG_INVALID
#   ULTIMATE_JOBS['HEARTBEAT_INTERVAL'] must be shorter than VISIBILITY_TIMEOUT, or every lease
#   lapses between renewals.
#   manage.py check: ['ultimate_jobs.E001']
# wake probe every: 60.0 | listen databases: {}
# LISTEN_DATABASES to an alias missing from DATABASES: [('ultimate_jobs.E013', "ULTIMATE_JOBS['LISTEN_DATABASES']['default']='default_direct', which is not in DATABASES.")]
