"""An async def job runs on the worker's one event-loop thread; sync jobs run on a thread pool.

Run it: python docs/examples/async_job.py
"""

import asyncio
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

from ultimate_jobs import NO_TENANT, Worker, job  # noqa: E402


@job(name="fx.fetch_rate", idempotency_key="fx:{currency}", tenant=NO_TENANT)
async def fetch_rate(ctx, *, currency: str) -> dict:
    await asyncio.sleep(0.05)  # e.g. an httpx.AsyncClient call
    return {"currency": currency, "per_eur": {"USD": 1.08, "GBP": 0.85}[currency]}


def main() -> None:
    from django.core.management import call_command

    from ultimate_jobs import ops

    call_command("migrate", verbosity=0)
    results = fetch_rate.enqueue_many([{"currency": "USD"}, {"currency": "GBP"}])
    print("is async:", fetch_rate.is_async)
    Worker(queues=["default"], burst=True).run()
    for result in results:
        row = ops.get_job(result.id)
        print(row["state"], row["result"])


if __name__ == "__main__":
    main()

# Output:
# is async: True
# done {'currency': 'USD', 'per_eur': 1.08}
# done {'currency': 'GBP', 'per_eur': 0.85}
