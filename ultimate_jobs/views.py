"""Internal: the optional views ``ultimate_jobs.urls`` mounts: ``metrics`` (Prometheus).

The metrics view answers 200 with the exposition text to a request bearing
``Authorization: Bearer <METRICS_TOKEN>`` (when that setting is set) or from a logged-in user
with ``ultimate_jobs.view_job``; 401 to anyone else (403 to a user lacking the permission);
501 when prometheus-client is not installed.
"""

from __future__ import annotations

import hmac

from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from ultimate_jobs.conf import get_settings
from ultimate_jobs.ops.metrics import render


def _allowed(request: HttpRequest) -> bool:
    token = get_settings().METRICS_TOKEN
    header = request.headers.get("Authorization", "")
    if token and header.startswith("Bearer ") and hmac.compare_digest(header[7:].strip().encode(), token.encode()):
        return True
    user = getattr(request, "user", None)
    return bool(user is not None and user.is_authenticated and user.has_perm("ultimate_jobs.view_job"))


@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    if not _allowed(request):
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            return HttpResponse("forbidden: needs ultimate_jobs.view_job\n", status=403, content_type="text/plain")
        response = HttpResponse("unauthorized: send Authorization: Bearer <METRICS_TOKEN>\n", status=401,
                                content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="ultimate_jobs metrics"'
        return response
    try:
        body, content_type = render()
    except ModuleNotFoundError as err:
        if (err.name or "").partition(".")[0] != "prometheus_client":
            raise  # a broken install is a 500, not "not installed"
        return HttpResponse("prometheus-client is not installed: pip install 'ultimate-jobs[metrics]'\n",
                            status=501, content_type="text/plain")
    return HttpResponse(body, content_type=content_type)
