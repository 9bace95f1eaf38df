# The declaration's sensitive=True, stored on the job row (and on a staged outbox row, which carries
# it to the job it becomes), so a process that never imported the declaration -- ops, the admin, the
# CLI, another worker -- still shows [redacted] (SPEC §10, issue 25).
#
# A boolean with a constant database default: on PostgreSQL 11+ `ADD COLUMN ... DEFAULT false NOT
# NULL` is a catalogue change (the default is kept in pg_attribute and read for the old rows), so no
# row is rewritten and the ACCESS EXCLUSIVE lock is held only for that instant. Rows written before it
# read false: a sensitive job enqueued before the upgrade is masked only where its declaration is
# imported, as before.
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("ultimate_jobs", "0013_write_path"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="sensitive",
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AddField(
            model_name="outboxentry",
            name="sensitive",
            field=models.BooleanField(db_default=False, default=False),
        ),
    ]
