"""Internal: the ``Job`` admin: changelist, bulk actions, the read-only job page and its buttons.

The changelist reads one page of rows with only the columns it shows and a 1,000-character
prefix of each payload (``preview_json`` masks secrets however the prefix is cut): the query
count does not grow with the rows shown, and no whole payload is ever loaded for a list.
Actions and buttons call ``ops.*`` one job at a time, so each refusal is reported by its code.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any
from urllib.parse import quote

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Q, TextField
from django.db.models.functions import Cast, Left
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from ultimate_jobs import clock, ops
from ultimate_jobs.admin import pages
from ultimate_jobs.conf import get_settings
from ultimate_jobs.declaration import get_job_handle, registered_jobs
from ultimate_jobs.errors import JobsError
from ultimate_jobs.models.jobs import LIVE_STATES, TERMINAL_STATES
from ultimate_jobs.ops.rows import id_prefix_range, is_id_prefix
from ultimate_jobs.redact import preview_json, redact_text

PREVIEW_CHARS = 1000
STATE_COLOURS = {"ready": "#2a7ab0", "delayed": "#7a5ab0", "running": "#1f8a4c", "suspended": "#8a6d1f",
                 "done": "#555", "failed": "#b35c00", "dead": "#ba2121", "cancelled": "#777"}
# action name -> (permission codename suffix, label, ops call)
BUTTONS: dict[str, tuple[str, str]] = {
    "retry": ("retry", "Retry"),
    "retry-from-failed-step": ("retry", "Retry from failed step"),
    "cancel": ("cancel", "Cancel"),
    "run-now": ("promote", "Run now"),
    "delete": ("delete", "Delete"),
}


def failed_step(job: ops.JobDetail) -> str | None:
    """The first step of the run that failed (or started and never completed), if any."""
    for step in job["steps"]:
        if step["status"] != "completed":
            return str(step["name"])
    return None


def _waiting(run_at: str | None) -> bool:
    """Whether a ready job is backing off: its ``run_at`` is still ahead."""
    return run_at is not None and datetime.fromisoformat(run_at.replace("Z", "+00:00")) > clock.now()


def _retry_from_failed_step(job_id: str) -> ops.JobDetail:
    return ops.retry_job(job_id, from_step=failed_step(ops.get_job(job_id)))


CALLS: dict[str, Callable[[str], Any]] = {
    "retry": ops.retry_job,
    "retry-from-failed-step": _retry_from_failed_step,
    "cancel": lambda job_id: ops.cancel_job(job_id, reason="from the admin"),
    "run-now": ops.promote_job,
    "delete": ops.remove_job,
}
DONE = {"retry": "retried", "retry-from-failed-step": "retried from the failed step", "cancel": "cancelled",
        "run-now": "made runnable now", "delete": "deleted"}


class _DeclaredFilter(admin.SimpleListFilter):
    """A filter whose choices come from the declarations, not from ``SELECT DISTINCT`` over the
    whole table (a full scan on every page view of a large job table)."""

    field = ""

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        values = sorted(self.choices_now(request))
        current = self.value()
        if current and current not in values:  # a filter from a link stays visible
            values.append(current)
        return [(v, v) for v in values]

    def choices_now(self, request: HttpRequest) -> set[str]:
        raise NotImplementedError

    def queryset(self, request: HttpRequest, queryset: Any) -> Any:
        return queryset.filter(**{self.field: self.value()}) if self.value() else queryset


class QueueFilter(_DeclaredFilter):
    title = "queue"
    parameter_name = field = "queue"

    def choices_now(self, request: HttpRequest) -> set[str]:
        return set(get_settings().QUEUES) | {h.queue for h in registered_jobs()}


class NameFilter(_DeclaredFilter):
    title = "name"
    parameter_name = field = "name"

    def choices_now(self, request: HttpRequest) -> set[str]:
        queue = request.GET.get("queue")  # with a queue chosen, the jobs declared on it
        return {h.name for h in registered_jobs() if not queue or h.queue == queue}


class JobAdmin(admin.ModelAdmin):
    list_display = ("short_id", "state_badge", "queue", "name", "tenant", "attempts", "run_at", "short_error",
                    "payload_preview")
    list_display_links = ("short_id",)
    list_filter = ("state", QueueFilter, NameFilter)
    search_fields = ("idempotency_key",)
    search_help_text = "An id or its first characters, an idempotency key (exact or its start), or a tenant id."
    date_hierarchy = "created_at"
    ordering = ("-id",)
    list_per_page = 50
    show_full_result_count = False  # one COUNT(*) fewer on a large table
    actions = ["retry_jobs", "retry_from_failed_step", "cancel_jobs", "run_jobs_now", "delete_jobs"]
    change_list_template = "admin/ultimate_jobs/job/change_list.html"

    # -- the changelist --------------------------------------------------------------------------

    def get_queryset(self, request: HttpRequest) -> Any:
        return (super().get_queryset(request)
                .only("id", "name", "queue", "state", "tenant_id", "attempt", "max_attempts", "run_at", "created_at",
                      "last_error", "error_code")
                .annotate(payload_head=Left(Cast("payload", TextField()), PREVIEW_CHARS)))

    def get_search_results(self, request: HttpRequest, queryset: Any, search_term: str) -> tuple[Any, bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        match = Q(idempotency_key=term) | Q(idempotency_key__startswith=term) | Q(tenant_id=term)
        if is_id_prefix(term):
            low, high = id_prefix_range(term)
            match |= Q(id__gte=low, id__lte=high)
        return queryset.filter(match), False

    @admin.display(description="id", ordering="id")
    def short_id(self, obj: Any) -> str:
        # The whole id: UUIDv7s made in one millisecond share their first 13 characters.
        return format_html('<span style="font-family:monospace;font-size:0.9em">{}</span>', obj.id)

    @admin.display(description="state", ordering="state")
    def state_badge(self, obj: Any) -> str:
        return format_html('<b style="color:{}">{}</b>', STATE_COLOURS.get(obj.state, "#333"), obj.state)

    @admin.display(description="tenant", ordering="tenant_id")
    def tenant(self, obj: Any) -> str:
        # Tenants are unbounded, so no sidebar filter (a DISTINCT scan); the value links to its rows.
        if obj.tenant_id is None:
            return "-"
        return format_html('<a href="?tenant_id={}">{}</a>', quote(obj.tenant_id), obj.tenant_id)

    @admin.display(description="attempts")
    def attempts(self, obj: Any) -> str:
        return f"{obj.attempt}/{obj.max_attempts}"

    @admin.display(description="error")
    def short_error(self, obj: Any) -> str:
        text = redact_text(obj.last_error) or ""
        lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("(not retried")]
        short = lines[-1] if lines else ""
        return (short[:79] + "\u2026") if len(short) > 80 else short

    @admin.display(description="payload")
    def payload_preview(self, obj: Any) -> str:
        handle = get_job_handle(obj.name)
        return format_html("<code>{}</code>", preview_json(obj.payload_head, limit=60,
                                                           sensitive=bool(handle and handle.sensitive)))

    # -- permissions -----------------------------------------------------------------------------

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # jobs are enqueued by code, never typed in

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # rows change only through ops (the actions and buttons)

    def _perm(self, request: HttpRequest, codename: str) -> bool:
        return request.user.has_perm(f"ultimate_jobs.{codename}_job")

    def has_retry_permission(self, request: HttpRequest) -> bool:
        return self._perm(request, "retry")

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return self._perm(request, "cancel")

    def has_promote_permission(self, request: HttpRequest) -> bool:
        return self._perm(request, "promote")

    def has_pause_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("ultimate_jobs.pause_queue")

    def get_actions(self, request: HttpRequest, action_location: Any = None) -> dict[str, Any]:
        # action_location exists from Django 6.1 (which warns about overrides without it).
        where = {} if action_location is None else {"action_location": action_location}
        actions = super().get_actions(request, **where)
        actions.pop("delete_selected", None)  # it would delete running jobs behind ops' back
        return actions

    # -- actions ---------------------------------------------------------------------------------

    def _each(self, request: HttpRequest, queryset: Any, action: str) -> None:
        ids = [str(i) for i in queryset.values_list("id", flat=True)[: ops.MAX_BULK]]
        done, refused = 0, []
        for job_id in ids:
            try:
                CALLS[action](job_id)
                done += 1
            except JobsError as err:
                refused.append((job_id, err))
        if done:
            self.message_user(request, f"{done} job(s) {DONE[action]}.", messages.SUCCESS)
        for job_id, refusal in refused[:20]:
            self.message_user(request, f"{job_id}: {refusal.code}: {refusal.cause} Fix: {refusal.fix}",
                              messages.WARNING)
        if len(refused) > 20:
            self.message_user(request, f"... and {len(refused) - 20} more refused.", messages.WARNING)

    @admin.action(description="Retry selected jobs", permissions=["retry"])
    def retry_jobs(self, request: HttpRequest, queryset: Any) -> None:
        self._each(request, queryset, "retry")

    @admin.action(description="Retry selected jobs from their failed step", permissions=["retry"])
    def retry_from_failed_step(self, request: HttpRequest, queryset: Any) -> None:
        self._each(request, queryset, "retry-from-failed-step")

    @admin.action(description="Cancel selected jobs", permissions=["cancel"])
    def cancel_jobs(self, request: HttpRequest, queryset: Any) -> None:
        self._each(request, queryset, "cancel")

    @admin.action(description="Run selected jobs now", permissions=["promote"])
    def run_jobs_now(self, request: HttpRequest, queryset: Any) -> None:
        self._each(request, queryset, "run-now")

    @admin.action(description="Delete selected jobs (never a running one)", permissions=["delete"])
    def delete_jobs(self, request: HttpRequest, queryset: Any) -> None:
        self._each(request, queryset, "delete")

    # -- the job page --------------------------------------------------------------------------------

    def get_urls(self) -> list[Any]:
        wrap = self.admin_site.admin_view
        return [
            path("queues/", wrap(pages.queues_view(self)), name="ultimate_jobs_queues"),
            path("queues/<str:queue>/<str:verb>/", wrap(pages.queue_toggle_view(self)),
                 name="ultimate_jobs_queue_toggle"),
            path("workers/", wrap(pages.workers_view(self)), name="ultimate_jobs_workers"),
            path("tasks/", wrap(pages.tasks_view(self)), name="ultimate_jobs_tasks"),
            path("tasks/<str:task>/<str:verb>/", wrap(pages.task_toggle_view(self)),
                 name="ultimate_jobs_task_toggle"),
            path("backfills/", wrap(pages.backfills_view(self)), name="ultimate_jobs_backfills"),
            path("<str:object_id>/do/<str:action>/", wrap(require_POST(self.job_action_view)),
                 name="ultimate_jobs_job_action"),
            *super().get_urls(),
        ]

    def buttons(self, request: HttpRequest, job: ops.JobDetail) -> list[dict[str, str]]:
        """The actions this user may take on this job in its current state."""
        state = job["state"]
        offered = {
            "retry": state in TERMINAL_STATES,
            "retry-from-failed-step": state in TERMINAL_STATES and failed_step(job) is not None,
            "cancel": state in LIVE_STATES,
            "run-now": state == "delayed" or (state == "ready" and _waiting(job["run_at"])),
            "delete": state != "running",
        }
        return [{"action": action, "label": label,
                 "url": reverse("admin:ultimate_jobs_job_action", args=[job["id"], action])}
                for action, (perm, label) in BUTTONS.items()
                if offered[action] and (self.has_delete_permission(request) if perm == "delete"
                                        else getattr(self, f"has_{perm}_permission")(request))]

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "",
                    extra_context: dict[str, Any] | None = None) -> HttpResponse:
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        try:
            job = ops.get_job(object_id)
        except JobsError as err:
            self.message_user(request, f"{err.code}: {err.cause}", messages.WARNING)
            return HttpResponseRedirect(reverse("admin:ultimate_jobs_job_changelist"))
        context = {
            **self.admin_site.each_context(request), "opts": self.opts, "title": f"{job['name']} \u00b7 {job['state']}",
            "job": job, "buttons": self.buttons(request, job), "failed_step": failed_step(job),
            "payload_json": json.dumps(job["payload"], indent=2, ensure_ascii=False),
            "result_json": None if job["result"] is None else json.dumps(job["result"], indent=2, ensure_ascii=False),
            "progress_json": None if job["progress"] is None else json.dumps(job["progress"]),
            "backfill_json": None if job["backfill"] is None else json.dumps(job["backfill"], indent=2),
            "steps": [{**s, "output_json": None if s["output"] is None else json.dumps(s["output"], ensure_ascii=False)}
                      for s in job["steps"]],
            "state_colour": STATE_COLOURS.get(job["state"], "#333"),
            **(extra_context or {}),
        }
        return TemplateResponse(request, "admin/ultimate_jobs/job/detail.html", context)

    def delete_view(self, request: HttpRequest, object_id: str, extra_context: Any = None) -> HttpResponse:
        """Django's own delete page would delete through the ORM (a running job too): the job
        page's Delete button (``ops.remove_job``) is the one way to delete."""
        self.message_user(request, "Delete a job with the Delete button on its page (never a running job).",
                          messages.INFO)
        return HttpResponseRedirect(reverse("admin:ultimate_jobs_job_change", args=[object_id]))

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        self._each(request, self.get_queryset(request).filter(pk=obj.pk), "delete")

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        self._each(request, queryset, "delete")

    def job_action_view(self, request: HttpRequest, object_id: str, action: str) -> HttpResponse:
        if action not in BUTTONS:
            raise PermissionDenied
        perm = BUTTONS[action][0]
        allowed = (self.has_delete_permission(request) if perm == "delete"
                   else getattr(self, f"has_{perm}_permission")(request))
        if not allowed:
            raise PermissionDenied
        page = reverse("admin:ultimate_jobs_job_change", args=[object_id])
        try:
            CALLS[action](object_id)
        except JobsError as err:
            self.message_user(request, f"{err.code}: {err.cause} Fix: {err.fix}", messages.WARNING)
            return HttpResponseRedirect(page)
        self.message_user(request, f"Job {object_id} {DONE[action]}.", messages.SUCCESS)
        if action == "delete":
            return HttpResponseRedirect(reverse("admin:ultimate_jobs_job_changelist"))
        return HttpResponseRedirect(page)
