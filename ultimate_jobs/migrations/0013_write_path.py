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
from django.db import NotSupportedError, migrations, models
from django.db.models import F, Q

# Django's AddIndexConcurrently / RemoveIndexConcurrently (django.contrib.postgres.operations) would
# do on PostgreSQL, but importing them imports psycopg, which a SQLite install never does; these
# two say the same on PostgreSQL and fall back to the plain statements elsewhere.


def _concurrently(schema_editor) -> bool:  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor != "postgresql":
        return False
    if schema_editor.connection.in_atomic_block:
        raise NotSupportedError("CREATE/DROP INDEX CONCURRENTLY cannot run inside a transaction "
                                "(the migration sets atomic = False).")
    return True


class AddIndexAnywhere(migrations.AddIndex):
    """CREATE INDEX CONCURRENTLY on PostgreSQL, a plain CREATE INDEX elsewhere (SQLite)."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):  # type: ignore[no-untyped-def]
        model = to_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(schema_editor.connection.alias, model):
            if _concurrently(schema_editor):
                schema_editor.add_index(model, self.index, concurrently=True)
            else:
                schema_editor.add_index(model, self.index)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):  # type: ignore[no-untyped-def]
        model = from_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(schema_editor.connection.alias, model):
            if _concurrently(schema_editor):
                schema_editor.remove_index(model, self.index, concurrently=True)
            else:
                schema_editor.remove_index(model, self.index)

    def describe(self):  # type: ignore[no-untyped-def]
        return f"Create index {self.index.name} on {self.model_name} (concurrently on PostgreSQL)"


class RemoveIndexAnywhere(migrations.RemoveIndex):
    """DROP INDEX CONCURRENTLY on PostgreSQL, a plain DROP INDEX elsewhere (SQLite)."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):  # type: ignore[no-untyped-def]
        model = from_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(schema_editor.connection.alias, model):
            index = from_state.models[app_label, self.model_name_lower].get_index_by_name(self.name)
            if _concurrently(schema_editor):
                schema_editor.remove_index(model, index, concurrently=True)
            else:
                schema_editor.remove_index(model, index)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):  # type: ignore[no-untyped-def]
        model = to_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(schema_editor.connection.alias, model):
            index = to_state.models[app_label, self.model_name_lower].get_index_by_name(self.name)
            if _concurrently(schema_editor):
                schema_editor.add_index(model, index, concurrently=True)
            else:
                schema_editor.add_index(model, index)

    def describe(self):  # type: ignore[no-untyped-def]
        return f"Remove index {self.name} from {self.model_name} (concurrently on PostgreSQL)"


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
