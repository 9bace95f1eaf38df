"""Internal: the operator's enqueue, re-exported by ``ultimate_jobs.ops`` (``jobs enqueue`` calls it).

``enqueue_job(name, input, queue=None, delay=None, tenant_id=None, by=None)`` queues one run of a
job declared in this process through the one enqueue path (``JobHandle.using(...).enqueue``): the
input is validated against the job's signature and every refusal comes before anything is
written. ``by`` is attribution (the row's ``enqueued_by`` and the log line), never authority: the
``TENANT_OF`` hook is not asked about an operator; ``tenant_id`` names the tenant explicitly.
Outside a transaction the row is inserted; with ``OUTBOX="required"`` it is staged in a
transaction of its own instead (the relay publishes it), as the setting asks of every enqueue.

Logged events: ``jobs.ops.enqueued`` (job id, name, queue, deduped, staged, ``by``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from django.db import transaction

from ultimate_jobs.conf import get_settings
from ultimate_jobs.durations import Duration
from ultimate_jobs.errors import X_JOB_INPUT_INVALID, X_JOB_NOT_REGISTERED, JobsError
from ultimate_jobs.handle import BoundJob
from ultimate_jobs.ops import audit
from ultimate_jobs.ops.types import EnqueuedJob
from ultimate_jobs.registry import get_job_handle

if TYPE_CHECKING:
    from ultimate_jobs.ops.audit import Actor

log = logging.getLogger("ultimate_jobs")


def enqueue_job(name: str, input: Mapping[str, Any] | str | None = None, *, queue: str | None = None,
                delay: Duration | None = None, tenant_id: str | None = None, by: Actor = None) -> EnqueuedJob:
    """Queue one run of the job declared as ``name``; answer ``{"id", "run_id", "name", "queue",
    "deduped", "staged"}`` (``deduped`` None when staged: the relay decides it).

    ``input`` is the job's keyword arguments, a mapping or its JSON text (None: no arguments).
    Raise ``X_JOB_NOT_REGISTERED`` for a name this process has not declared,
    ``X_JOB_INPUT_INVALID`` for input the signature refuses (or a bad ``delay``),
    ``X_QUEUE_INVALID`` for a malformed queue, ``X_JOB_TENANT_MISMATCH`` when ``tenant_id`` is not
    the input's tenant. Nothing is written when it raises.
    """
    handle = get_job_handle(name)
    if handle is None:
        raise JobsError(X_JOB_NOT_REGISTERED, f"No job named {name!r} is declared in this process.")
    if isinstance(input, str):
        try:
            input = json.loads(input)
        except ValueError as exc:
            raise JobsError(X_JOB_INPUT_INVALID, f"{name}: the input is not JSON ({exc}).",
                            'Pass the keyword arguments as a JSON object, e.g. --input \'{"order_id": 42}\'.') from None
    values = handle.parse(input if input is not None else {})
    bound = handle.using(queue=queue, delay=delay, tenant_id=tenant_id)
    # Attribution only: set after using(), so TENANT_OF (which resolves a user's tenant) never
    # receives an operator's name.
    bound = BoundJob(handle, dataclasses.replace(bound.options, enqueued_by=audit.who(by)))
    if get_settings().OUTBOX == "required":
        with transaction.atomic(using=get_settings().DATABASE):
            written = bound.enqueue(**values)
    else:
        written = bound.enqueue(**values)
    answer = EnqueuedJob(id=str(written.id), run_id=str(written.run_id), name=handle.name,
                         queue=queue or handle.queue, deduped=written.deduped, staged=written.staged)
    log.info("jobs.ops.enqueued job_id=%s name=%s queue=%s deduped=%s staged=%s by=%s", answer["id"], answer["name"],
             answer["queue"], answer["deduped"], answer["staged"], audit.who(by))
    return answer
