"""Tenants: every job says which org it acts for. Two orgs never deduplicate into each other,
an enqueue that names another org than the input's is refused, and NO_TENANT jobs store none.

Run it: python docs/examples/tenants.py
"""

import atexit
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

from ultimate_jobs import NO_TENANT, JobsError, Worker, job  # noqa: E402


@job(name="billing.invoice", idempotency_key="invoice:{invoice_id}", tenant=lambda org_id, **_: org_id)
def invoice(ctx, *, org_id: str, invoice_id: int) -> str:
    return f"{ctx.tenant_id}/{invoice_id}"


@job(name="ops.rotate_logs", idempotency_key="rotate", tenant=NO_TENANT)
def rotate_logs(ctx) -> None:
    pass


def main() -> None:
    from django.core.management import call_command

    from ultimate_jobs import ops

    call_command("migrate", verbosity=0)

    acme = invoice.enqueue(org_id="acme", invoice_id=42)
    globex = invoice.enqueue(org_id="globex", invoice_id=42)  # same key, another tenant: another job
    print("two jobs:", acme.id != globex.id, "| deduped:", acme.deduped, globex.deduped)
    try:
        invoice.using(tenant_id="globex").enqueue(org_id="acme", invoice_id=43)
    except JobsError as err:
        print("refused:", err.code)
    rotate = rotate_logs.enqueue()

    Worker(queues=["default"], burst=True).run()
    for result in (acme, globex, rotate):
        row = ops.get_job(result.id)
        print(row["name"], "tenant:", row["tenant_id"], "| result:", row["result"])
    print("acme's jobs:", [row["name"] for row in ops.list_jobs(tenant_id="acme")["jobs"]])


if __name__ == "__main__":
    main()

# Output:
# two jobs: True | deduped: False False
# refused: X_JOB_TENANT_MISMATCH
# billing.invoice tenant: acme | result: acme/42
# billing.invoice tenant: globex | result: globex/42
# ops.rotate_logs tenant: None | result: None
# acme's jobs: ['billing.invoice']
