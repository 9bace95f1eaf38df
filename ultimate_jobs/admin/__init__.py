"""The Django admin as the dead-letter console: the job changelist, a read-only job page with
action buttons, and pages for queues, workers, scheduled tasks and the backfill ledger.

Usage: add ``"django.contrib.admin"`` to ``INSTALLED_APPS`` (with auth, sessions, messages)
and mount ``admin.site.urls``; "Jobs" appears under the ultimate_jobs app.

Options (default): none. Permissions (``ultimate_jobs.<codename>``): ``view_job`` to look,
``retry_job`` (retry, retry from the failed step), ``cancel_job``, ``promote_job`` (run now),
``delete_job``, ``pause_queue`` (pause/resume queues and scheduled tasks). A user without the
permission sees no button or action, and a direct POST is refused (403, or an admin message).

Every write goes through ``ultimate_jobs.ops`` (a refusal — ``JobsError`` — becomes a warning
message, never a 500), and everything shown passed the redactor. Logged events: those of
``ops`` (``jobs.ops.*``, ``jobs.queue.*``).
"""

from __future__ import annotations

from django.contrib import admin

from ultimate_jobs.admin.jobs import JobAdmin
from ultimate_jobs.admin.webhooks import WebhookDeliveryAdmin  # noqa: F401  (registers the ledger pages)
from ultimate_jobs.models import Job

admin.site.register(Job, JobAdmin)

__all__ = ["JobAdmin"]
