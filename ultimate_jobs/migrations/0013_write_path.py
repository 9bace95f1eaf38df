# The write path (SPEC §15): a fresh job enters three indexes instead of five -- the primary key, the
# live key (the dedupe) and the claim's ready (or due) index. The two whole-table indexes go:
# `(state, queue)`, which only reports read, and `(run_id)`, which every row entered. In their place,
# two partial indexes a fresh job does not enter:
#   - ultimate_jobs_job_finished (state, finished_at, queue) WHERE state is terminal: the retention
#     purge's range and queue_stats' finished buckets; a row enters it when it finishes;
#   - ultimate_jobs_job_run_member (run_id) WHERE run_id <> id: a run's first job now carries its own
#     id as its run id (found by the primary key), so only jobs that joined another run are here.
#     Rows written before this migration all have run_id <> id and are all indexed.
#
# On PostgreSQL every step is CONCURRENTLY, outside a transaction (atomic = False): writes to the job
# table go on while the new indexes build, and no step holds more than a brief lock. The build reads
# the whole table (a few seconds per million rows); see docs/upgrading.md for timings, for running the
# four statements by hand before `migrate` on a huge table, and for an interrupted build (an INVALID
# index: drop it and migrate again). SQLite gets the plain index operations.
from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models
from django.db.models import F, Q


class AddIndexAnywhere(AddIndexConcurrently):
    """CREATE INDEX CONCURRENTLY on PostgreSQL, a plain CREATE INDEX elsewhere (SQLite)."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):  # type: ignore[no-untyped-def]
        if schema_editor.connection.vendor == "postgresql":
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        return migrations.AddIndex.database_forwards(self, app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):  # type: ignore[no-untyped-def]
        if schema_editor.connection.vendor == "postgresql":
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        return migrations.AddIndex.database_backwards(self, app_label, schema_editor, from_state, to_state)


class RemoveIndexAnywhere(RemoveIndexConcurrently):
    """DROP INDEX CONCURRENTLY on PostgreSQL, a plain DROP INDEX elsewhere (SQLite)."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):  # type: ignore[no-untyped-def]
        if schema_editor.connection.vendor == "postgresql":
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        return migrations.RemoveIndex.database_forwards(self, app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):  # type: ignore[no-untyped-def]
        if schema_editor.connection.vendor == "postgresql":
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        return migrations.RemoveIndex.database_backwards(self, app_label, schema_editor, from_state, to_state)


class Migration(migrations.Migration):
    atomic = False
    dependencies = [("ultimate_jobs", "0011_fleet_slot")]

    operations = [
        AddIndexAnywhere(
            model_name="job",
            index=models.Index(fields=["state", "finished_at", "queue"], name="ultimate_jobs_job_finished",
                               condition=Q(state__in=("done", "failed", "dead", "cancelled"))),
        ),
        AddIndexAnywhere(
            model_name="job",
            index=models.Index(fields=["run_id"], name="ultimate_jobs_job_run_member", condition=~Q(run_id=F("id"))),
        ),
        RemoveIndexAnywhere(model_name="job", name="ultimate_jobs_job_state"),
        RemoveIndexAnywhere(model_name="job", name="ultimate_jobs_job_run"),
    ]
