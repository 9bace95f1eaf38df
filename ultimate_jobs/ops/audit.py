"""Internal: who did an operator write — in the log line and in Django's admin history.

Every ``ops`` write takes ``by=``: a Django user (the admin passes ``request.user``) or a plain
string (the CLI passes ``--by``, else ``cli:<OS user>``). ``who(by)`` is the name the log line
and the job's note carry. ``record(...)`` also writes one ``django.contrib.admin`` ``LogEntry``
per job touched when ``by`` is a user and the admin app is installed (``LogEntry.user`` cannot be
a free string, so a CLI write is recorded in the log only). ``by=None`` records nothing extra.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, TypeAlias
from uuid import UUID

from django.apps import apps
from django.db.models import Model

if TYPE_CHECKING:
    from django.contrib.auth.base_user import AbstractBaseUser
    from django.contrib.auth.models import AnonymousUser

    # What ``by=`` takes: a user (``request.user``; an anonymous one records nothing), or a name.
    Actor: TypeAlias = "str | AbstractBaseUser | AnonymousUser | None"

log = logging.getLogger("ultimate_jobs")

ADDITION, CHANGE, DELETION = 1, 2, 3  # django.contrib.admin.models' action flags, spelled here so the
# module imports without the admin app installed
MAX_BY = 200


def who(by: Actor) -> str | None:
    """The actor's name: a user's username, or the string given (at most ``MAX_BY`` characters)."""
    user = _user(by)
    if user is not None:
        return str(user.get_username())[:MAX_BY]
    if isinstance(by, str):  # PostgreSQL cannot store NUL: escaped (who() is also read after writes, never refuses)
        return by[:MAX_BY].replace("\x00", "\\x00")
    return None  # an anonymous user: nobody to name


def _user(by: Actor) -> AbstractBaseUser | None:
    if by is None or isinstance(by, str) or not by.is_authenticated or by.pk is None:
        return None
    return by


def record(by: Actor, verb: str, objects: Iterable[tuple[UUID | str, str]], *, flag: int = CHANGE,
           detail: str = "", model: type[Model] | None = None) -> None:
    """One ``LogEntry`` per ``(object id, name)`` when ``by`` is a user and the admin is installed:
    ``change_message`` says ``verb`` (and ``detail``). The objects are jobs unless ``model`` says
    otherwise (``QueuePause`` for a queue, ``SchedulerState`` for a task)."""
    user = _user(by)
    if user is None or not apps.is_installed("django.contrib.admin"):
        return
    from django.contrib.admin.models import LogEntry
    from django.contrib.contenttypes.models import ContentType

    from ultimate_jobs.models import Job

    kind = ContentType.objects.get_for_model(model or Job)
    message = f"{verb} through ultimate_jobs.ops" + (f" ({detail})" if detail else "")
    LogEntry.objects.bulk_create([
        LogEntry(user_id=user.pk, content_type=kind, object_id=str(object_id),
                 object_repr=f"{name} {object_id}"[:200] if model is None else name[:200], action_flag=flag,
                 change_message=message[:2000])
        for object_id, name in objects])
