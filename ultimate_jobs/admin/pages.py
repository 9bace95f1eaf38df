"""Internal: the admin pages beside the job changelist: the overview, queues, workers, scheduled
tasks and the backfill ledger. Each reads one ``ops`` call; pausing and resuming (queues and
tasks) needs ``ultimate_jobs.pause_queue`` and a POST. The fleet-wide pages (all but the
overview) are refused to a user the ``ADMIN_TENANT_OF`` hook scopes to one tenant.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from ultimate_jobs import ops
from ultimate_jobs.admin.overview import overview_context
from ultimate_jobs.admin.scope import tenant_scope
from ultimate_jobs.errors import JobsError

if TYPE_CHECKING:
    from ultimate_jobs.admin.jobs import JobAdmin

View = Callable[..., HttpResponse]
STATE_COLUMNS = ("ready", "delayed", "running", "suspended", "failed", "dead", "done", "cancelled")


def _render(admin: JobAdmin, request: HttpRequest, template: str, title: str, *, fleet: bool = True,
            **context: Any) -> HttpResponse:
    if not admin.has_view_or_change_permission(request) or (fleet and tenant_scope(request) is not None):
        raise PermissionDenied
    return TemplateResponse(request, f"admin/ultimate_jobs/{template}", {
        **admin.admin_site.each_context(request), "opts": admin.opts, "title": title,
        "can_pause": admin.has_pause_permission(request), **context})


def overview_view(admin: JobAdmin) -> View:
    """The overview as a page; ``?partial=1`` answers only its fragment (the live refresh)."""
    def view(request: HttpRequest) -> HttpResponse:
        if request.GET.get("partial") == "1":
            if not admin.has_view_or_change_permission(request):
                raise PermissionDenied
            return TemplateResponse(request, "admin/ultimate_jobs/_overview.html", overview_context(request))
        return _render(admin, request, "overview.html", "Overview", fleet=False, **overview_context(request))
    return view


def queues_view(admin: JobAdmin) -> View:
    def view(request: HttpRequest) -> HttpResponse:
        changelist = reverse("admin:ultimate_jobs_job_changelist")
        rows = [{**q, "cells": [(s, dict(q)[s], f"{changelist}?queue={q['queue']}&state__exact={s}")
                                for s in STATE_COLUMNS]}
                for q in ops.queue_stats()]
        return _render(admin, request, "queues.html", "Queues", queues=rows, states=STATE_COLUMNS)
    return view


def _toggle(admin: JobAdmin, request: HttpRequest, verb: str, act: Callable[[], object], back: str,
            what: str) -> HttpResponse:
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    if (not admin.has_pause_permission(request) or verb not in ("pause", "resume")
            or tenant_scope(request) is not None):
        raise PermissionDenied
    try:
        act()
    except JobsError as err:
        admin.message_user(request, f"{err.code}: {err.cause} Fix: {err.fix}", messages.WARNING)
    else:
        admin.message_user(request, f"{what} {verb}d.", messages.SUCCESS)
    return HttpResponseRedirect(reverse(back))


def queue_toggle_view(admin: JobAdmin) -> View:
    def view(request: HttpRequest, queue: str, verb: str) -> HttpResponse:
        def act() -> Any:
            return (ops.pause_queue(queue, by=request.user) if verb == "pause"
                    else ops.resume_queue(queue, by=request.user))
        return _toggle(admin, request, verb, act, "admin:ultimate_jobs_queues", f"Queue {queue}")
    return view


def workers_view(admin: JobAdmin) -> View:
    def view(request: HttpRequest) -> HttpResponse:
        return _render(admin, request, "workers.html", "Workers", workers=ops.workers())
    return view


def tasks_view(admin: JobAdmin) -> View:
    def view(request: HttpRequest) -> HttpResponse:
        return _render(admin, request, "tasks.html", "Scheduled tasks", tasks=ops.scheduled_tasks())
    return view


def task_toggle_view(admin: JobAdmin) -> View:
    def view(request: HttpRequest, task: str, verb: str) -> HttpResponse:
        def act() -> Any:
            return (ops.pause_task(task, by=request.user) if verb == "pause"
                    else ops.resume_task(task, by=request.user))
        return _toggle(admin, request, verb, act, "admin:ultimate_jobs_tasks", f"Task {task}")
    return view


def backfills_view(admin: JobAdmin) -> View:
    """Read-only: what is declared (and its state), then the ledger, one row per pass, each linked
    to the job that ran it; ``?name=`` narrows the ledger to one backfill."""
    def view(request: HttpRequest) -> HttpResponse:
        name = request.GET.get("name") or None
        report = ops.pending_backfills()
        runs = [{**run, "job_url": reverse("admin:ultimate_jobs_job_change", args=[run["job_id"]]),
                 "runs_url": f"{reverse('admin:ultimate_jobs_job_changelist')}?{urlencode({'name': run['name']})}"}
                for run in ops.backfill_runs(200, name=name)]
        return _render(admin, request, "backfills.html", "Backfill ledger", report=report, runs=runs, name=name)
    return view
