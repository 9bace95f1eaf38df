# The claim walks live rows only: the one runnable-rows index (ready, delayed and suspended in claim
# order) becomes two. A claim over it walked every delayed row not yet due (the run_at <= now test
# was a filter, not a bound, under ORDER BY priority), so 100,000 rows waiting for later made every
# idle claim scan 100,000 index entries. Now `ready` rows are walked in claim order and
# `delayed`/`suspended` rows by run_at, a range that stops at the first row not yet due; finished
# rows were already outside both.
#
# Building an index holds off writes to the table while it builds. On a large table, create the two
# CONCURRENTLY by hand (same names and predicates), drop the old one, then `migrate --fake
# ultimate_jobs 0010_queue_performance`: see docs/scaling.md.
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("ultimate_jobs", "0009_webhooks")]

    operations = [
        migrations.AddIndex(
            model_name="job",
            index=models.Index(fields=["queue", "priority", "run_at", "id"], name="ultimate_jobs_job_ready",
                               condition=models.Q(state="ready")),
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(fields=["queue", "run_at"], name="ultimate_jobs_job_due",
                               condition=models.Q(state__in=("delayed", "suspended"))),
        ),
        migrations.RemoveIndex(model_name="job", name="ultimate_jobs_job_claim"),
    ]
