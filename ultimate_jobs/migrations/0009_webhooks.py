# Reserved in the migration graph so parallel work lands in a fixed order; operations are added
# by the change that needs them.
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("ultimate_jobs", "0008_attempts_and_event_tenants")]

    operations: list[migrations.operations.base.Operation] = []
