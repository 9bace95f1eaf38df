# The webhook failure counter is per (declaration, tenant, endpoint), not per endpoint id alone
# (issue 25): one declaration's or tenant's failures no longer disable another's endpoint.
#
# The old table is renamed aside, the new one created under the old name, and each old row copied to
# every (declaration, tenant) the ledger has deliveries for that endpoint under (its count and its
# disabled mark with it: a disabled endpoint stays disabled). An old row with no delivery left in the
# ledger (all purged after DEAD_RETENTION) has no declaration to key it by and is dropped.
#
# And WebhookReceipt: one row per inbound event a webhook_receiver accepted, kept after its job
# settles, so a replay of the event id inside the receiver's dedupe_window is not handled again.
from django.db import migrations, models


def copy_states(apps, schema_editor):  # type: ignore[no-untyped-def]
    alias = schema_editor.connection.alias
    old = apps.get_model("ultimate_jobs", "WebhookEndpointStateOld")
    new = apps.get_model("ultimate_jobs", "WebhookEndpointState")
    deliveries = apps.get_model("ultimate_jobs", "WebhookDelivery")
    for row in old.objects.using(alias).order_by("endpoint_id").iterator():
        keys = deliveries.objects.using(alias).filter(endpoint_id=row.endpoint_id).values_list(
            "name", "tenant_id").distinct()
        new.objects.using(alias).bulk_create([
            new(name=name, tenant_id=tenant_id or "", endpoint_id=row.endpoint_id,
                consecutive_failures=row.consecutive_failures, disabled_at=row.disabled_at,
                last_error_code=row.last_error_code, updated_at=row.updated_at)
            for name, tenant_id in {(n, t or "") for n, t in keys}])


class Migration(migrations.Migration):

    dependencies = [
        ('ultimate_jobs', '0014_job_sensitive'),
    ]

    operations = [
        migrations.RenameModel('WebhookEndpointState', 'WebhookEndpointStateOld'),
        migrations.AlterModelTable('WebhookEndpointStateOld', 'ultimate_jobs_webhookendpointstate_old'),
        migrations.CreateModel(
            name='WebhookEndpointState',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('name', models.CharField(max_length=200)),
                ('tenant_id', models.CharField(blank=True, default='', max_length=200)),
                ('endpoint_id', models.CharField(max_length=200)),
                ('consecutive_failures', models.IntegerField(default=0)),
                ('disabled_at', models.DateTimeField(blank=True, null=True)),
                ('last_error_code', models.CharField(blank=True, max_length=64, null=True)),
                ('updated_at', models.DateTimeField()),
            ],
            options={
                'db_table': 'ultimate_jobs_webhookendpointstate',
                'constraints': [models.UniqueConstraint(fields=('name', 'tenant_id', 'endpoint_id'),
                                                        name='ultimate_jobs_whe_key')],
                'indexes': [models.Index(fields=['endpoint_id'], name='ultimate_jobs_whe_endpoint')],
            },
        ),
        migrations.RunPython(copy_states, migrations.RunPython.noop),
        migrations.DeleteModel('WebhookEndpointStateOld'),
        migrations.CreateModel(
            name='WebhookReceipt',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('name', models.CharField(max_length=200)),
                ('tenant_id', models.CharField(blank=True, default='', max_length=200)),
                ('event_id', models.CharField(max_length=256)),
                ('received_at', models.DateTimeField()),
            ],
            options={
                'db_table': 'ultimate_jobs_webhookreceipt',
                'constraints': [models.UniqueConstraint(fields=('name', 'tenant_id', 'event_id'),
                                                        name='ultimate_jobs_whr_key')],
                'indexes': [models.Index(fields=['received_at'], name='ultimate_jobs_whr_age')],
            },
        ),
    ]
