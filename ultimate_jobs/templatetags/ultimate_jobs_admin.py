"""Internal: the admin templates' tags — ``{% uj_overview %}`` (the overview on the app's landing
page) and the ``uj_when`` / ``uj_badge`` / ``uj_short_id`` filters (a relative time with the UTC
instant on hover; a state badge; an id's short form with the whole id on hover). Load with
``{% load ultimate_jobs_admin %}``."""

from __future__ import annotations

from typing import Any

from django import template
from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from ultimate_jobs.admin.display import badge, short_id, when
from ultimate_jobs.admin.overview import overview_context

register = template.Library()


@register.simple_tag(takes_context=True)
def uj_overview(context: template.Context) -> SafeString:
    request = context.get("request")
    if request is None or not request.user.has_perm("ultimate_jobs.view_job"):
        return SafeString("")
    return SafeString(render_to_string("admin/ultimate_jobs/_overview.html", overview_context(request), request))


@register.filter
def uj_when(value: Any) -> SafeString:
    return when(value)


@register.filter
def uj_badge(value: Any) -> SafeString:
    return badge(str(value))


@register.filter
def uj_short_id(value: Any) -> SafeString:
    return short_id(value)
