"""Consumers: consumer() reading a vendor's feed per account, run in-process with run_job. Prints
the run's result, the orders and the cursor committed together, what ops.get_job reports, a second
run that resumes at the cursor, the arm job and its supervisor task, and a refusal.

The tables are models declared in this script (app_label "shop") and created with the schema
editor; in a project they are your app's models, migrated as usual.

Run it: python docs/examples/consumer.py
"""

import atexit
import tempfile

import django
from django.conf import settings
from django.db import connection, models

TMP = tempfile.TemporaryDirectory()
atexit.register(TMP.cleanup)
settings.configure(
    INSTALLED_APPS=["ultimate_jobs"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": f"{TMP.name}/jobs.sqlite3"}},
    USE_TZ=True,
)
django.setup()

from ultimate_jobs import JobsError, consumer  # noqa: E402


class Order(models.Model):
    account = models.CharField(max_length=50)
    number = models.IntegerField()

    class Meta:
        app_label = "shop"
        unique_together = [("account", "number")]


class Cursor(models.Model):
    key = models.CharField(max_length=50, unique=True)
    value = models.IntegerField()

    class Meta:
        app_label = "shop"


FEED = {"acme": list(range(1, 26)), "globex": list(range(1, 8))}  # the vendor's order numbers


def stream(*, key, cursor, cancel):  # any iterator; cancel is the run's token (a drain sets it)
    return ({"number": n} for n in FEED[key] if n > (cursor or 0))


def handle(items, *, key):  # runs in one transaction with save(): both commit, or neither
    Order.objects.bulk_create([Order(account=key, number=i["number"]) for i in items], ignore_conflicts=True)
    return items[-1]["number"]  # the cursor past this batch


def load(key):
    return Cursor.objects.filter(key=key).values_list("value", flat=True).first()


def save(key, value):
    Cursor.objects.update_or_create(key=key, defaults={"value": value})


sync_orders = consumer(
    name="shop.sync-orders", tenant=lambda key: key,
    keys=lambda: sorted(FEED), open=stream, handle=handle, cursor=(load, save),
    batch=10, rearm="5m", lag=lambda *, key, cursor: len([n for n in FEED[key] if n > cursor]))


def main():
    from django.core.management import call_command

    from ultimate_jobs import get_job_handle, ops, registered_tasks
    from ultimate_jobs.models import Job
    from ultimate_jobs.testing import run_job

    call_command("migrate", verbosity=0)
    with connection.schema_editor() as editor:
        editor.create_model(Order)
        editor.create_model(Cursor)

    first = run_job(sync_orders, key="acme")
    print("result:", first.result)
    print("orders:", Order.objects.filter(account="acme").count(), "cursor:", load("acme"))
    job = ops.get_job(first.id)
    print("consumer:", job["consumer"]["key"], "lag", job["consumer"]["lag"], "progress", job["progress"]["done"],
          "of", job["progress"]["total"])

    FEED["acme"] += [26, 27]  # the vendor has more
    again = run_job(sync_orders, key="acme")
    print("again:", again.result, "cursor:", load("acme"))

    supervisor = next(t for t in registered_tasks() if t.name == "shop.sync-orders.supervisor")
    print("supervisor:", supervisor.cron, supervisor.tz, "->", supervisor.job.name)
    armed = run_job(get_job_handle("shop.sync-orders.arm"))
    print("armed:", armed.result, sorted(Job.objects.filter(name="shop.sync-orders", state="ready")
                                        .values_list("payload__key", flat=True)))

    try:
        consumer(name="shop.bad", tenant=lambda key: key, keys=lambda: [], open=stream, handle=handle,
                 cursor=(load, save), timeout="10m")
    except JobsError as err:
        print("refused:", err.code, "-", err.cause.split(":", 1)[1].split("(")[0].strip())


if __name__ == "__main__":
    main()

# Output:
# result: {'key': 'acme', 'batches': 3, 'items': 25}
# orders: 25 cursor: 25
# consumer: acme lag 0 progress 25 of 25
# again: {'key': 'acme', 'batches': 1, 'items': 2} cursor: 27
# supervisor: */5 * * * * UTC -> shop.sync-orders.arm
# armed: {'keys': 2, 'started': 2} ['acme', 'globex']
# refused: X_CONSUMER_INVALID - a consumer has no timeout: a run ends with its stream or a drain
