"""Enqueueing in bulk: enqueue_many answers one EnqueueResult per input, in order; inputs that
share a key are one job; every refusal comes before the first write.

Run it: python docs/examples/enqueue_many.py
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

from ultimate_jobs import MAX_ENQUEUE_BATCH, NO_TENANT, EnqueueResult, JobsError, Worker, job  # noqa: E402


@job(name="catalog.reindex", idempotency_key="reindex:{sku}", tenant=NO_TENANT)
def reindex(ctx, *, sku: str) -> str:
    return sku.lower()


def main() -> None:
    from django.core.management import call_command

    from ultimate_jobs import ops

    call_command("migrate", verbosity=0)

    results = reindex.enqueue_many([{"sku": "A-1"}, {"sku": "B-2"}, {"sku": "A-1"}])
    assert all(isinstance(r, EnqueueResult) for r in results)
    print("deduped:", [r.deduped for r in results], "| staged:", [r.staged for r in results])
    print("third is the first:", results[2].id == results[0].id)

    print("MAX_ENQUEUE_BATCH =", MAX_ENQUEUE_BATCH)
    unknown_argument = [{"sku": "C-3"}, {"sku": "D-4", "colour": "red"}]
    too_many = [{"sku": "x"}] * (MAX_ENQUEUE_BATCH + 1)
    for inputs in (unknown_argument, too_many):
        try:
            reindex.enqueue_many(inputs)
        except JobsError as err:
            print("refused:", err.code)
    print("jobs in the table:", len(ops.list_jobs()["jobs"]))  # the refused calls wrote nothing

    Worker(queues=["default"], burst=True).run()
    print("results:", [ops.get_job(r.id)["result"] for r in results])


if __name__ == "__main__":
    main()

# Output:
# deduped: [False, False, True] | staged: [False, False, False]
# third is the first: True
# MAX_ENQUEUE_BATCH = 10000
# refused: X_JOB_INPUT_INVALID
# refused: X_JOB_ENQUEUE_BATCH_TOO_LARGE
# jobs in the table: 2
# results: ['a-1', 'b-2', 'a-1']
