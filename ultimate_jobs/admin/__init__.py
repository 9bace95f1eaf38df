"""The Django admin as the on-call console: the overview (the app's landing page), the job
changelist (the dead-letter console), a read-only job page with its attempt history and action
buttons, and pages for queues, workers, scheduled tasks and the backfill ledger.

Usage: add ``"django.contrib.admin"`` to ``INSTALLED_APPS`` (with auth, sessions, messages)
and mount ``admin.site.urls``; ``/admin/ultimate_jobs/`` is the overview.

Options (default): ``ULTIMATE_JOBS["ADMIN_TENANT_OF"]`` (None: every tenant) scopes a request to
one tenant (``admin.scope``). Permissions (``ultimate_jobs.<codename>``): ``view_job`` to look,
``retry_job`` (retry, retry from a step), ``cancel_job``, ``promote_job`` (run now),
``delete_job``, ``pause_queue`` (pause/resume queues and scheduled tasks). A user without the
permission sees no button or action, and a direct POST is refused (403, or an admin message).

Every write asks for confirmation, then goes through ``ultimate_jobs.ops`` with
``by=request.user`` (a ``LogEntry`` per job; a refusal — ``JobsError`` — becomes a warning
message, never a 500); everything shown passed the redactor; the job list accepts only its own
URL filters. Times are UTC. Logged events: those of ``ops`` (``jobs.ops.*``, ``jobs.queue.*``).
"""

from __future__ import annotations

from django.contrib import admin

from ultimate_jobs.admin.jobs import JobAdmin
from ultimate_jobs.admin.webhooks import WebhookDeliveryAdmin  # noqa: F401  (registers the ledger pages)
from ultimate_jobs.models import Job

admin.site.register(Job, JobAdmin)

__all__ = ["JobAdmin"]
