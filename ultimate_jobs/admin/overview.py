"""Internal: the admin's overview — the app's landing page (``/admin/ultimate_jobs/``) and
``job/overview/`` — built from ``ops.overview()``: per queue the done/failed charts for the last
hour and day, depth and oldest-ready age; live workers; tasks due next; the last day's dead jobs.

The page refreshes its numbers every ``REFRESH_SECONDS`` without a full reload: a few lines of
inline JavaScript fetch ``job/overview/?partial=1`` (this same HTML fragment, rendered on the
server) and swap it in, only while the tab is visible. Without JavaScript the page is complete,
just not live.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.urls import reverse

from ultimate_jobs import ops
from ultimate_jobs.admin.charts import bar_chart
from ultimate_jobs.admin.display import headline
from ultimate_jobs.admin.scope import tenant_scope

REFRESH_SECONDS = 15


def overview_context(request: HttpRequest) -> dict[str, Any]:
    """What ``_overview.html`` reads, for this request's tenant scope."""
    view = ops.overview(tenant_id=tenant_scope(request))
    change = "admin:ultimate_jobs_job_change"
    changelist = reverse("admin:ultimate_jobs_job_changelist")
    queues = [{**q, "hour_chart": bar_chart(q["hour"], f"{q['queue']}: done and failed per minute, last hour"),
               "day_chart": bar_chart(q["day"], f"{q['queue']}: done and failed per minute (15-minute buckets), "
                                                "last day"),
               "hour_done": sum(q["hour"]["done"]), "hour_failed": sum(q["hour"]["failed"]),
               "day_done": sum(q["day"]["done"]), "day_failed": sum(q["day"]["failed"]),
               "url": f"{changelist}?queue={q['queue']}"}
              for q in view["queues"]]
    dead = [{**d, "url": reverse(change, args=[d["id"]]), "headline": headline(d["error"])}
            for d in view["dead_last_day"]]
    return {"overview": view, "queues": queues, "dead": dead, "refresh_seconds": REFRESH_SECONDS,
            "partial_url": reverse("admin:ultimate_jobs_overview") + "?partial=1",
            "dead_url": f"{changelist}?state__exact=dead", "scoped": view["tenant_id"] is not None}
