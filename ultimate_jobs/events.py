"""``publish_event``: the stored event bus that ``ctx.step.wait_for_event`` waits on.

Usage::

    from django.db import transaction
    from ultimate_jobs import publish_event

    with transaction.atomic():
        invoice.mark_paid()
        publish_event("invoice.paid", {"invoice": invoice.pk}, tenant_id=invoice.org_id)

    # in a job body: suspends until a matching event is published after the wait began
    paid = ctx.step.wait_for_event("paid", "invoice.paid", match={"invoice": 42}, timeout="7d")

The event is a row (``JobEvent``) written on the caller's connection, so a publish inside
``transaction.atomic()`` commits or rolls back with the caller: a rolled-back publish never
existed and wakes nobody. A wait matches an event of its name published at or after the moment
the wait began (read off the database clock on PostgreSQL) whose payload *contains* the wait's
``match`` (JSON containment: PostgreSQL's jsonb ``@>``, the same rule in Python on SQLite). On
PostgreSQL the publish wakes its waiters in the same statement (their run becomes due at once and
their queue is notified at commit); everywhere a suspended wait is also re-checked every
``event_poll`` (the backstop).

Events are tenant-scoped: a run waits only for events published under its own ``tenant_id``, and
a ``NO_TENANT`` run only for events published with none, so one org's event (and its payload)
never reaches another org's run.

Options (default): ``tenant_id`` (the tenant of the job body publishing, whose ``TENANT_CONTEXT`` is
active; ``None`` outside a job body: pass it explicitly from a request), ``database`` (the
``DATABASE`` setting, and every alias ``QUEUE_DATABASES`` routes to). The payload is a JSON object
of at most ``MAX_PAYLOAD_BYTES``; the event name is 1-200 printable characters; a tenant id is 1-200
characters without NUL (an int is taken as its string, as ``@job(tenant=...)`` renders it), or
``None``. Raises ``X_EVENT_INVALID`` before writing anything when one does not fit.

Logged events: ``jobs.event.published`` (debug).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any, Final

from ultimate_jobs import clock, jsoncodec
from ultimate_jobs.conf import get_settings
from ultimate_jobs.context import refuse_if_cancelled
from ultimate_jobs.db import store_for
from ultimate_jobs.db.routing import aliases
from ultimate_jobs.errors import X_EVENT_INVALID, JobsError
from ultimate_jobs.ids import uuid7

log = logging.getLogger("ultimate_jobs")

MAX_EVENT_NAME_CHARS = 200
MAX_TENANT_CHARS = 200


class _FromContext:
    def __repr__(self) -> str:
        return "<the active tenant>"


ACTIVE_TENANT: Final = _FromContext()
_active_tenant: ContextVar[str | None] = ContextVar("ultimate_jobs_active_tenant", default=None)


@contextlib.contextmanager
def acting_as(tenant_id: str | None) -> Iterator[None]:
    """Internal (the runtime's tenant context): publishes inside the block default to ``tenant_id``."""
    token = _active_tenant.set(tenant_id)
    try:
        yield
    finally:
        _active_tenant.reset(token)


def check_event_name(event: object) -> str:
    """``event`` when it is an event name (1-200 printable characters); raise ``X_EVENT_INVALID`` if not."""
    if not isinstance(event, str) or not 1 <= len(event) <= MAX_EVENT_NAME_CHARS or not event.isprintable():
        raise JobsError(X_EVENT_INVALID, f"event={event!r} is not an event name.")
    return event


def publish_event(event: str, payload: dict[str, Any], *, tenant_id: str | None | _FromContext = ACTIVE_TENANT,
                  database: str | None = None) -> int:
    """Publish ``payload`` under ``event`` for ``tenant_id``'s waiters; answer how many suspended
    waiters it woke at once.

    Raise ``X_EVENT_INVALID`` for a bad name, a bad tenant id or a payload that is not a JSON
    object under ``MAX_PAYLOAD_BYTES``; ``JobCancelled`` (the cancel's code) from a job body whose
    run was cancelled.
    """
    refuse_if_cancelled("publish_event")
    check_event_name(event)
    tenant = _active_tenant.get() if isinstance(tenant_id, _FromContext) else tenant_id
    if isinstance(tenant, int) and not isinstance(tenant, bool):
        tenant = str(tenant)  # an org's primary key, as @job(tenant=...) renders it
    if tenant is not None and (not isinstance(tenant, str) or not 1 <= len(tenant) <= MAX_TENANT_CHARS
                               or "\x00" in tenant):
        raise JobsError(X_EVENT_INVALID, f"publish_event({event!r}): tenant_id={tenant!r} is not a tenant id "
                        f"(1-{MAX_TENANT_CHARS} characters without NUL, or None).")
    if not isinstance(payload, dict):
        raise JobsError(X_EVENT_INVALID, f"publish_event({event!r}): the payload must be a dict (a JSON object), "
                        f"not {type(payload).__name__}.")
    try:
        text = jsoncodec.dumps(payload, max_bytes=get_settings().MAX_PAYLOAD_BYTES, what=f"event {event!r} payload")
    except jsoncodec.NotJSON as exc:
        raise JobsError(X_EVENT_INVALID, f"{exc}.") from None
    # With QUEUE_DATABASES a waiter may be on any jobs database: the event is published on each.
    targets = [database] if database is not None or not get_settings().QUEUE_DATABASES else aliases()
    woken = sum(store_for(alias).event_publish(event_id=uuid7(), name=event, payload=text, tenant_id=tenant,
                                               now=clock.sql_now()) for alias in targets)
    log.debug("jobs.event.published event=%s tenant_id=%s woken=%s", event, tenant, woken)
    return woken
