"""Declaring jobs: every @job option, the resolved declaration, describe(), registered_jobs() and
the refusals that happen at import time.

Run it: python docs/examples/declare_job.py
"""

import atexit
import pprint
import tempfile

import django
from django.conf import settings

TMP = tempfile.TemporaryDirectory()
atexit.register(TMP.cleanup)
settings.configure(
    INSTALLED_APPS=["ultimate_jobs"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": f"{TMP.name}/jobs.sqlite3"}},
    USE_TZ=True,
)
django.setup()

from ultimate_jobs import NO_TENANT, Concurrency, JobsError, Retry, job, registered_jobs  # noqa: E402


@job(
    name="billing.invoice",                       # a durable queue key: declare one and keep it
    idempotency_key="invoice:{invoice_id}",       # REQUIRED: format string over the input, or a callable
    tenant=lambda org_id, **_: org_id,            # REQUIRED: callable, format string, or NO_TENANT
    queue="billing",
    priority=-5,                                  # lower runs first
    retry=Retry(attempts=5, backoff="exponential", delay="1s", max_delay="1h"),
    timeout="10m",
    concurrency=Concurrency(key="{org_id}", limit=1, when_busy="wait"),
    sensitive=True,
)
def invoice(ctx, *, org_id: str, invoice_id: int, notify: bool = True) -> None:
    """Bill one invoice."""


@job(name="maintenance.vacuum", idempotency_key="vacuum", tenant=NO_TENANT, retry=2, concurrency=1)
def vacuum(ctx) -> None:
    pass


def main() -> None:
    print(invoice)
    print("name:", invoice.name, "| queue:", invoice.queue, "| priority:", invoice.priority)
    print("retry:", invoice.retry.attempts, invoice.retry.backoff, "| timeout:", invoice.timeout, "s")
    print("describe:")
    pprint.pprint(invoice.describe(), sort_dicts=False, width=100)
    print("vacuum retry:", vacuum.retry.attempts, "| concurrency:", vacuum.describe()["concurrency"])
    print("registered:", [handle.name for handle in registered_jobs()])

    refusals = {
        "no idempotency_key": lambda: job(tenant=NO_TENANT)(lambda ctx: None),
        "no tenant": lambda: job(idempotency_key="k")(lambda ctx: None),
        "same name twice": lambda: job(name="billing.invoice", idempotency_key="k", tenant=NO_TENANT)(
            lambda ctx: None),
        "concurrency=0": lambda: job(idempotency_key="k", tenant=NO_TENANT, concurrency=0)(lambda ctx: None),
        "key names no input": lambda: job(idempotency_key="{missing}", tenant=NO_TENANT)(lambda ctx: None),
        "called directly": lambda: invoice(org_id="acme", invoice_id=1),
    }
    for what, attempt in refusals.items():
        try:
            attempt()
        except JobsError as err:
            print(f"{what}: {err.code}")


if __name__ == "__main__":
    main()

# Output:
# <JobHandle billing.invoice queue=billing>
# name: billing.invoice | queue: billing | priority: -5
# retry: 5 exponential | timeout: 600.0 s
# describe:
# {'name': 'billing.invoice',
#  'queue': 'billing',
#  'priority': -5,
#  'retry': {'attempts': 5,
#            'backoff': 'exponential',
#            'delay': 1.0,
#            'max_delay': 3600.0,
#            'jitter': True,
#            'dead_letter': True},
#  'idempotent': True,
#  'tenant': 'per-input',
#  'concurrency': {'limit': 1, 'keyed': True, 'when_busy': 'wait'},
#  'timeout': 600.0,
#  'sensitive': True,
#  'input': [{'name': 'org_id', 'required': True, 'annotation': 'str'},
#            {'name': 'invoice_id', 'required': True, 'annotation': 'int'},
#            {'name': 'notify', 'required': False, 'annotation': 'bool'}]}
# vacuum retry: 2 | concurrency: {'limit': 1, 'keyed': False, 'when_busy': 'wait'}
# registered: ['billing.invoice', 'maintenance.vacuum', 'ultimate_jobs.purge_retention']
# no idempotency_key: X_IDEMPOTENCY_REQUIRED
# no tenant: X_JOB_TENANT_REQUIRED
# same name twice: X_JOB_DUPLICATE
# concurrency=0: X_JOB_DECLARATION_INVALID
# key names no input: X_JOB_DECLARATION_INVALID
# called directly: X_JOB_CALLED_DIRECTLY
