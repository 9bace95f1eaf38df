# The webhook ledger (WebhookDelivery, WebhookEndpointState) and the consumers' per-key report (ConsumerState).

import ultimate_jobs.ids
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('ultimate_jobs', '0008_attempts_and_event_tenants'),
    ]

    operations = [
        migrations.CreateModel(
            name='WebhookEndpointState',
            fields=[
                ('endpoint_id', models.CharField(max_length=200, primary_key=True, serialize=False)),
                ('consecutive_failures', models.IntegerField(default=0)),
                ('disabled_at', models.DateTimeField(blank=True, null=True)),
                ('last_error_code', models.CharField(blank=True, max_length=64, null=True)),
                ('updated_at', models.DateTimeField()),
            ],
            options={
                'db_table': 'ultimate_jobs_webhookendpointstate',
            },
        ),
        migrations.CreateModel(
            name='ConsumerState',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('name', models.CharField(max_length=200)),
                ('key', models.CharField(max_length=200)),
                ('batches', models.BigIntegerField(default=0)),
                ('items', models.BigIntegerField(default=0)),
                ('lag', models.BigIntegerField(blank=True, null=True)),
                ('last_batch_at', models.DateTimeField(blank=True, null=True)),
            ],
            options={
                'db_table': 'ultimate_jobs_consumerstate',
                'constraints': [models.UniqueConstraint(fields=('name', 'key'), name='ultimate_jobs_consumer_key')],
            },
        ),
        migrations.CreateModel(
            name='WebhookDelivery',
            fields=[
                ('id', models.UUIDField(default=ultimate_jobs.ids.uuid7, editable=False, primary_key=True, serialize=False)),
                ('name', models.CharField(max_length=200)),
                ('job_id', models.UUIDField(blank=True, null=True)),
                ('tenant_id', models.CharField(blank=True, max_length=200, null=True)),
                ('endpoint_id', models.CharField(max_length=200)),
                ('event_id', models.CharField(max_length=200)),
                ('topic', models.CharField(blank=True, default='', max_length=200)),
                ('attempt', models.IntegerField()),
                ('status_code', models.IntegerField(blank=True, null=True)),
                ('duration_ms', models.IntegerField(default=0)),
                ('error_code', models.CharField(blank=True, max_length=64, null=True)),
                ('delivered_at', models.DateTimeField()),
            ],
            options={
                'verbose_name_plural': 'webhook deliveries',
                'db_table': 'ultimate_jobs_webhookdelivery',
                'indexes': [models.Index(fields=['job_id'], name='ultimate_jobs_whd_job'), models.Index(fields=['endpoint_id', 'delivered_at'], name='ultimate_jobs_whd_endpoint'), models.Index(fields=['delivered_at'], name='ultimate_jobs_whd_age')],
            },
        ),
    ]
