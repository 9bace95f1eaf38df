"""Internal: the ``Job`` admin: the changelist, its bulk actions, the job page and its buttons.

The changelist reads one page of rows with only the columns it shows and a 1,000-character
prefix of each payload (``preview_json`` masks secrets however the prefix is cut): the query
count does not grow with the rows shown, and no whole payload is ever loaded for a list. It
accepts only its own filters in the URL (``ALLOWED_LOOKUPS``): any other lookup is refused with
a 400, so a view-only user cannot probe a redacted value (``?payload__password__startswith=h``).
Buttons and actions confirm first, then call ``ops`` one job at a time (``admin.actions``).
"""

from __future__ import annotations

from datetime import UTC
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import Case, Q, TextField, When
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Left
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from ultimate_jobs import ops
from ultimate_jobs.admin import pages
from ultimate_jobs.admin.actions import BUTTONS, DESTRUCTIVE, act, failed_step, report
from ultimate_jobs.admin.display import EMPTY, badge, error_is_current, headline, short_id, when
from ultimate_jobs.admin.jobpage import job_context, offered
from ultimate_jobs.admin.scope import tenant_scope
from ultimate_jobs.conf import get_settings
from ultimate_jobs.db.routing import alias_for_queue, is_routed
from ultimate_jobs.errors import JobsError
from ultimate_jobs.names import TASK_JOB
from ultimate_jobs.ops import routes
from ultimate_jobs.ops.rows import id_prefix_range, is_id_prefix, name_match
from ultimate_jobs.redact import preview_json, redact_text
from ultimate_jobs.registry import get_job_handle, registered_jobs

if TYPE_CHECKING:
    from ultimate_jobs.models import Job

    _JobModelAdmin = admin.ModelAdmin[Job]
else:  # django-stubs types ModelAdmin over its model; Django's class takes no subscript at run time
    _JobModelAdmin = admin.ModelAdmin

PREVIEW_CHARS = 1000
# The URL lookups the changelist itself makes: its filters, the tenant links, the date drill-down.
ALLOWED_LOOKUPS = frozenset({"state__exact", "state__isnull", "queue", "name", "tenant_id", "created_at__year",
                             "created_at__month", "created_at__day"})


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

    def queryset(self, request: HttpRequest, queryset: Any) -> Any:
        # A Django task's module path (the link in its row) filters its rows, as in ops and the CLI.
        value = self.value()
        return queryset.filter(name_match(value)) if value else queryset


class JobAdmin(_JobModelAdmin):
    list_display = ("job_id", "state_badge", "job_name", "tenant", "attempt_count", "updated", "short_error",
                    "payload_preview")
    list_display_links = ("job_id",)
    list_filter = ("state", QueueFilter, NameFilter)
    search_fields = ("idempotency_key",)
    search_help_text = ("An id, its first characters or its short form (01a23171…3bc2), an idempotency key (exact "
                        "or its start), or a tenant id.")
    date_hierarchy = "created_at"
    ordering = ("-id",)
    list_per_page = 50
    show_full_result_count = False  # one COUNT(*) fewer on a large table
    actions = ["retry_jobs", "retry_from_failed_step", "cancel_jobs", "run_jobs_now", "delete_jobs"]
    change_list_template = "admin/ultimate_jobs/job/change_list.html"

    # -- the changelist --------------------------------------------------------------------------

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest | None = None) -> bool:
        return lookup in ALLOWED_LOOKUPS

    def get_queryset(self, request: HttpRequest) -> Any:
        query = super().get_queryset(request)
        queue = request.GET.get("queue")
        if queue and is_routed(queue):  # QUEUE_DATABASES: a routed queue's jobs are on its database
            query = query.using(alias_for_queue(queue))
        tenant = tenant_scope(request)
        if tenant is not None:
            query = query.filter(tenant_id=tenant)
        return (query.only("id", "name", "queue", "state", "tenant_id", "attempt", "max_attempts", "run_at",
                           "created_at", "updated_at", "last_error", "error_code", "sensitive")
                .annotate(payload_head=Left(Cast("payload", TextField()), PREVIEW_CHARS),
                          task_path=Case(When(name=TASK_JOB, then=KT("payload__task")), default=None)))

    def get_search_results(self, request: HttpRequest, queryset: Any, search_term: str) -> tuple[Any, bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        match = Q(idempotency_key=term) | Q(idempotency_key__startswith=term) | Q(tenant_id=term)
        if is_id_prefix(term):
            low, high = id_prefix_range(term)
            match |= Q(id__gte=low, id__lte=high)
        elif "\u2026" in term or "..." in term:  # the short form the list shows: 01a23171…3bc2
            try:
                match |= Q(id__in=ops.matching_job_ids(term, limit=ops.MAX_PAGE))
            except JobsError:
                pass  # not an id after all: the key and tenant matches stand
        return queryset.filter(match), False

    @admin.display(description="id", ordering="id")
    def job_id(self, obj: Any) -> str:
        return short_id(obj.id)

    @admin.display(description="state", ordering="state")
    def state_badge(self, obj: Any) -> str:
        return badge(obj.state)

    @admin.display(description="job · queue", ordering="name")
    def job_name(self, obj: Any) -> str:
        # A break opportunity after each dot: "payments.capture" wraps whole words, never "capt|ure".
        path = getattr(obj, "task_path", None)
        shown = path if isinstance(path, str) and path else obj.name
        parts = format_html_join(mark_safe(".<wbr>"), "{}", ((part,) for part in shown.split(".")))
        if shown != obj.name:  # a Django task: its own path, a link to its rows
            return format_html('<a href="?name={}" title="django.tasks task">{}</a><span class="uj-queue">{}</span>',
                               quote(shown), parts, obj.queue)
        return format_html('{}<span class="uj-queue">{}</span>', parts, obj.queue)

    @admin.display(description="tenant", ordering="tenant_id")
    def tenant(self, obj: Any) -> str:
        # Tenants are unbounded, so no sidebar filter (a DISTINCT scan); the value links to its rows.
        if obj.tenant_id is None:
            return EMPTY
        return format_html('<a href="?tenant_id={}">{}</a>', quote(obj.tenant_id), obj.tenant_id)

    @admin.display(description="tries")
    def attempt_count(self, obj: Any) -> str:
        return f"{obj.attempt}/{obj.max_attempts}"

    @admin.display(description="updated", ordering="updated_at")
    def updated(self, obj: Any) -> str:
        return when(obj.updated_at)

    @admin.display(description="last error")
    def short_error(self, obj: Any) -> str:
        text = redact_text(obj.last_error) or ""
        line = headline(text)
        if not line or obj.state == "done":
            return EMPTY  # a done job's error belongs to an earlier attempt: the job page has it
        shown = line if len(line) <= 160 else line[:159] + "\u2026"
        if error_is_current(obj.state):
            return format_html('<span class="uj-error" title="{}">{}</span>', text[:2000], shown)
        return format_html('<span class="uj-error uj-earlier" title="earlier attempt: {}">earlier attempt: {}</span>',
                           text[:2000], shown)

    @admin.display(description="payload")
    def payload_preview(self, obj: Any) -> str:
        handle = get_job_handle(obj.name)
        # The row's flag: this process may never have imported the declaration (SPEC §10).
        sensitive = bool(obj.sensitive) or bool(handle and handle.sensitive)
        preview = preview_json(obj.payload_head, limit=300, sensitive=sensitive)
        return format_html('<details class="uj-payload"><summary>{}</summary><code>{}</code></details>',
                           preview[:14] + ("\u2026" if len(preview) > 14 else ""), preview)

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        # UTC here too (docs/admin.md, "Time"): the date drill-down's days are UTC days.
        with timezone.override(UTC):
            response = super().changelist_view(request, {"title": "All jobs", **(extra_context or {})})
            if isinstance(response, TemplateResponse):
                response.render()
            return response

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

    def may(self, request: HttpRequest, action: str) -> bool:
        perm = BUTTONS[action][0]
        return (self.has_delete_permission(request) if perm == "delete"
                else bool(getattr(self, f"has_{perm}_permission")(request)))

    def get_actions(self, request: HttpRequest, action_location: Any = None) -> dict[str, Any]:
        # action_location exists from Django 6.1 (which warns about overrides without it).
        where = {} if action_location is None else {"action_location": action_location}
        actions = super().get_actions(request, **where)
        actions.pop("delete_selected", None)  # it would delete running jobs behind ops' back
        return actions

    # -- bulk actions: a confirmation page, then one ops call per job ---------------------------------

    def _bulk(self, request: HttpRequest, queryset: Any, action: str) -> HttpResponse | None:
        picked = [(str(i), n) for i, n in queryset.order_by("-id").values_list("id", "name")[: ops.MAX_BULK]]
        if request.POST.get("confirmed") != "yes":
            return TemplateResponse(request, "admin/ultimate_jobs/job/confirm.html", {
                **self.admin_site.each_context(request), "opts": self.opts, "title": "Are you sure?",
                "action": action, "label": BUTTONS[action][1], "effect": BUTTONS[action][2],
                "destructive": action in DESTRUCTIVE, "bulk_action": request.POST.get("action"),
                "jobs": [{"id": i, "name": n, "url": reverse("admin:ultimate_jobs_job_change", args=[i])}
                         for i, n in picked],
                "select_across": request.POST.get("select_across", "0"),
                "back": request.get_full_path()})
        report(request, action, len(picked), act(request, action, picked))
        return None

    @admin.action(description="Retry selected jobs", permissions=["retry"])
    def retry_jobs(self, request: HttpRequest, queryset: Any) -> HttpResponse | None:
        return self._bulk(request, queryset, "retry")

    @admin.action(description="Retry selected jobs from their failed step", permissions=["retry"])
    def retry_from_failed_step(self, request: HttpRequest, queryset: Any) -> HttpResponse | None:
        return self._bulk(request, queryset, "retry-from-failed-step")

    @admin.action(description="Cancel selected jobs", permissions=["cancel"])
    def cancel_jobs(self, request: HttpRequest, queryset: Any) -> HttpResponse | None:
        return self._bulk(request, queryset, "cancel")

    @admin.action(description="Run selected jobs now", permissions=["promote"])
    def run_jobs_now(self, request: HttpRequest, queryset: Any) -> HttpResponse | None:
        return self._bulk(request, queryset, "run-now")

    @admin.action(description="Delete selected jobs (never a running one)", permissions=["delete"])
    def delete_jobs(self, request: HttpRequest, queryset: Any) -> HttpResponse | None:
        return self._bulk(request, queryset, "delete")

    # -- the job page and the pages beside the changelist ---------------------------------------------

    def get_urls(self) -> list[Any]:
        wrap = self.admin_site.admin_view
        return [
            path("overview/", wrap(pages.overview_view(self)), name="ultimate_jobs_overview"),
            path("queues/", wrap(pages.queues_view(self)), name="ultimate_jobs_queues"),
            path("queues/<str:queue>/<str:verb>/", wrap(pages.queue_toggle_view(self)),
                 name="ultimate_jobs_queue_toggle"),
            path("workers/", wrap(pages.workers_view(self)), name="ultimate_jobs_workers"),
            path("tasks/", wrap(pages.tasks_view(self)), name="ultimate_jobs_tasks"),
            path("tasks/<str:task>/<str:verb>/", wrap(pages.task_toggle_view(self)),
                 name="ultimate_jobs_task_toggle"),
            path("backfills/", wrap(pages.backfills_view(self)), name="ultimate_jobs_backfills"),
            path("<str:object_id>/do/<str:action>/", wrap(self.job_action_view), name="ultimate_jobs_job_action"),
            *super().get_urls(),
        ]

    def _job(self, request: HttpRequest, object_id: str) -> ops.JobDetail | None:
        """The job, or None after a warning (unknown, malformed, or another tenant's)."""
        try:
            job = ops.get_job(object_id)
        except JobsError as err:
            self.message_user(request, f"{err.code}: {err.cause}", "warning")
            return None
        tenant = tenant_scope(request)
        if tenant is not None and job["tenant_id"] != tenant:
            self.message_user(request, f"X_JOB_NOT_FOUND: No job has the id {object_id}.", "warning")
            return None
        return job

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "",
                    extra_context: dict[str, Any] | None = None) -> HttpResponse:
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        job = self._job(request, object_id)
        if job is None:
            return HttpResponseRedirect(reverse("admin:ultimate_jobs_job_changelist"))
        actions = [a for a in offered(job) if self.may(request, a)]
        with routes.on_job_database(job["id"]):  # QUEUE_DATABASES: its earlier runs are beside it
            page = job_context(job, actions)
        context = {**self.admin_site.each_context(request), "opts": self.opts, **page, **(extra_context or {})}
        return TemplateResponse(request, "admin/ultimate_jobs/job/detail.html", context)

    def delete_view(self, request: HttpRequest, object_id: str, extra_context: Any = None) -> HttpResponse:
        """Django's own delete page would delete through the ORM (a running job too): the job
        page's Delete button (``ops.remove_job``) is the one way to delete."""
        return HttpResponseRedirect(reverse("admin:ultimate_jobs_job_action", args=[object_id, "delete"]))

    def job_action_view(self, request: HttpRequest, object_id: str, action: str) -> HttpResponse:
        """GET: the confirmation page for one job; POST: act, then back to the job (or the list)."""
        if action not in BUTTONS or not self.may(request, action):
            raise PermissionDenied
        job = self._job(request, object_id)
        page = reverse("admin:ultimate_jobs_job_change", args=[object_id])
        if job is None:
            return HttpResponseRedirect(reverse("admin:ultimate_jobs_job_changelist"))
        steps = [s["name"] for s in job["steps"]]
        if request.method != "POST":
            return TemplateResponse(request, "admin/ultimate_jobs/job/confirm.html", {
                **self.admin_site.each_context(request), "opts": self.opts, "title": "Are you sure?",
                "action": action, "label": BUTTONS[action][1], "effect": BUTTONS[action][2],
                "destructive": action in DESTRUCTIVE, "one": job, "back": page,
                "steps": steps if action == "retry-from-failed-step" else [],
                "chosen_step": failed_step(job),
                "jobs": [{"id": job["id"], "name": job["name"], "url": page}]})
        step = request.POST.get("step") or None
        refused = act(request, action, [(job["id"], job["name"])], step)
        report(request, action, 1, refused)
        if action == "delete" and not refused:
            return HttpResponseRedirect(reverse("admin:ultimate_jobs_job_changelist"))
        return HttpResponseRedirect(page)
