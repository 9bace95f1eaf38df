# The fleet concurrency slot's model is FleetSlot (it was JobLease: "lease" now means a claimed job's
# lease and the scheduler leader's, nothing else) and its key column is concurrency_key, the job
# column whose value it holds. The table keeps its name; the column rename is a catalogue change
# on PostgreSQL and SQLite alike, so no row is rewritten.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('ultimate_jobs', '0010_queue_performance'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    "ALTER TABLE ultimate_jobs_joblease RENAME COLUMN lease_key TO concurrency_key",
                    reverse_sql="ALTER TABLE ultimate_jobs_joblease RENAME COLUMN concurrency_key TO lease_key",
                ),
            ],
            state_operations=[
                migrations.DeleteModel(name='JobLease'),
                migrations.CreateModel(
                    name='FleetSlot',
                    fields=[
                        ('pk', models.CompositePrimaryKey('concurrency_key', 'slot', blank=True, editable=False,
                                                          primary_key=True, serialize=False)),
                        ('concurrency_key', models.CharField(max_length=200)),
                        ('slot', models.IntegerField()),
                        ('holder', models.CharField(max_length=200)),
                        ('job_id', models.UUIDField()),
                        ('expires_at', models.DateTimeField()),
                    ],
                    options={
                        'db_table': 'ultimate_jobs_joblease',
                    },
                ),
            ],
        ),
    ]
