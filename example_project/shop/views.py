"""The shop's web endpoint: an ``async def`` view that enqueues a job from async code.

Served by ``example_project/asgi.py`` under an ASGI server. ``aenqueue`` takes the same input and
gives the same answer as ``enqueue`` (the job's ids, ``deduped``), sending its statement off the
event loop, so the server keeps serving other requests meanwhile. A repeated notice for the same
order answers the job already queued (``deduped: true``): the idempotency key is the order.
"""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from ultimate_jobs import JobsError

from .jobs import send_receipt


@csrf_exempt  # a machine-to-machine notice (a payment provider's callback), not a browser form
@require_POST
async def order_paid(request: HttpRequest, order_id: int) -> JsonResponse:
    """``POST /shop/orders/<order_id>/paid`` (form field ``shop``): queue the receipt, answer 202."""
    try:
        queued = await send_receipt.aenqueue(shop=request.POST.get("shop", "acme"), order_id=order_id, batch="web")
    except JobsError as err:  # an input the job refuses: the caller's mistake, named
        return JsonResponse({"error": err.code, "cause": err.cause}, status=400)
    return JsonResponse({"job_id": str(queued.id), "deduped": queued.deduped, "staged": queued.staged}, status=202)
