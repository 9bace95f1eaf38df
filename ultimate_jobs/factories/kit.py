"""Internal: the setup every factory shares — the body it writes declared as an ordinary job, and
the checks of its name and of the options most factories take (a missing tenant, a whole number,
a duration, a callable, a flag, the default idempotency key).

Every check names the factory and the option as written (``"webhook 'billing': disable_after=0
..."``), raises ``JobsError`` with the factory's own code (``X_JOB_DECLARATION_INVALID`` unless the
factory has one: ``X_CONSUMER_INVALID``, ``X_WEBHOOK_RECEIVER_INVALID``...) and a one-line fix
(the factory's, else the code's own), and answers the value as the factory keeps it. ``is_whole``
is the whole-number test alone, for a value refused another way (a ``ValueError``, a terminal
error in the run).
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeGuard, TypeVar, Unpack

from ultimate_jobs import jsoncodec
from ultimate_jobs.declaration import JobOptions, job
from ultimate_jobs.durations import to_seconds
from ultimate_jobs.errors import X_JOB_DECLARATION_INVALID, X_JOB_TENANT_REQUIRED, JobsError
from ultimate_jobs.inputs import IdempotencyKey, Tenant
from ultimate_jobs.names import check_job_name

if TYPE_CHECKING:
    from ultimate_jobs.context import JobContext
    from ultimate_jobs.handle import JobHandle

P = ParamSpec("P")
R = TypeVar("R")
C = TypeVar("C", bound=Callable[..., object])


def declare(body: Callable[Concatenate[JobContext, P], R], *, label: str, function_name: str | None = None,
            doc: str | None = None, idempotency_key: IdempotencyKey, tenant: Tenant,
            **options: Unpack[JobOptions]) -> JobHandle[P, R]:
    """Declare ``body`` (the function the factory wrote) as a job, as if the factory's caller had
    written it: ``__module__`` is the module that called the factory (two frames up: the factory
    calls this directly), ``__qualname__`` is ``label`` (``"export_rows[shop.export]"``), and
    ``__name__`` is ``function_name`` or ``label``. The declaring module is the handle's source, so
    a second declaration of the name from another module is ``X_JOB_DUPLICATE``, while re-running
    the same module (a reload) replaces it. Every ``@job`` refusal applies."""
    body.__module__ = sys._getframe(2).f_globals.get("__name__", "?")
    body.__qualname__ = label
    body.__name__ = function_name or label
    if doc is not None:
        body.__doc__ = doc
    return job(body, idempotency_key=idempotency_key, tenant=tenant, **options)


def named(factory: str, name: str) -> tuple[str, str]:
    """The job name, checked as ``@job`` checks one (``X_JOB_DECLARATION_INVALID``), and the owner
    every refusal of the factory names: ``"<factory> '<name>'"``."""
    name = check_job_name(name)
    return name, f"{factory} {name!r}"


def missing_tenant(*, owner: str, fix: str, why: str = "", code: str = X_JOB_TENANT_REQUIRED) -> JobsError:
    """The refusal of a factory declared without a tenant (``X_JOB_TENANT_REQUIRED`` unless the
    factory has a code of its own); ``why`` says what the tenant scopes ("an import writes some
    org's rows"). The factory raises it, ``if tenant is None: raise missing_tenant(...)``, so a type
    checker reads the tenant as present after it."""
    return JobsError(code, f"{owner} has no tenant{'; ' + why if why else ''}.", fix)


def is_whole(value: object, low: int | None = None, high: int | None = None) -> TypeGuard[int]:
    """Whether ``value`` is an ``int`` (never a ``bool``) from ``low`` to ``high`` (each optional)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return False
    return (low is None or value >= low) and (high is None or value <= high)


def whole_number(value: object, *, owner: str, option: str, low: int = 1, high: int | None = None,
                 unit: str = "", fix: str | None = None, code: str = X_JOB_DECLARATION_INVALID) -> int:
    """``value`` when it is a whole number from ``low`` (to ``high``); else ``code``. A ``bool`` or a
    float (``1.5``, ``2.0``) is refused; ``unit`` names what is counted ("rows", "bytes")."""
    if not is_whole(value, low, high):
        counted = f" of {unit}" if unit else ""
        bounds = f">= {low}" if high is None else f"from {low:,} to {high:,}"
        raise JobsError(code, f"{owner}: {option}={value!r} is not a whole number{counted} {bounds}.", fix)
    return value


def positive_duration(value: object, *, owner: str, option: str, code: str = X_JOB_DECLARATION_INVALID) -> float:
    """``value`` in seconds when it is a positive, finite duration (``"30s"``, a ``timedelta``, a
    number of seconds); else ``code``, with the parser's cause and fix."""
    try:
        return to_seconds(value, subject=option, code=code)
    except JobsError as err:
        raise JobsError(code, f"{owner}: {err.cause}", err.fix) from None


def require_callable(value: C | None, *, owner: str, option: str, fix: str | None = None,
                     code: str = X_JOB_DECLARATION_INVALID) -> C:
    """``value`` when it is callable; else ``code`` (None too: a required hook left out)."""
    if not callable(value):
        raise _not_callable(value, owner=owner, option=option, fix=fix, code=code)
    return value


def require_callables(*, owner: str, fix: str | None = None, code: str = X_JOB_DECLARATION_INVALID,
                      **hooks: object) -> None:
    """Refuse the first of ``hooks`` (option name -> value, in the order given) that is not callable."""
    for option, value in hooks.items():
        if not callable(value):
            raise _not_callable(value, owner=owner, option=option, fix=fix, code=code)


def _not_callable(value: object, *, owner: str, option: str, fix: str | None, code: str) -> JobsError:
    return JobsError(code, f"{owner}: {option}={value!r} is not callable.", fix)


def optional_callable(value: C | None, *, owner: str, option: str, fix: str | None = None,
                      code: str = X_JOB_DECLARATION_INVALID) -> C | None:
    """``value`` when it is None (left out) or callable; else ``code``."""
    return None if value is None else require_callable(value, owner=owner, option=option, fix=fix, code=code)


def require_bool(value: object, *, owner: str, option: str, code: str = X_JOB_DECLARATION_INVALID) -> bool:
    """``value`` when it is ``True`` or ``False`` (not 1, not "yes"); else ``code``."""
    if not isinstance(value, bool):
        raise JobsError(code, f"{owner}: {option}={value!r} must be True or False.")
    return value


def literal_key(name: str) -> str:
    """``name`` as an idempotency key template that renders to itself (its braces escaped), for a
    job whose key is its name: one live run at a time."""
    return name.replace("{", "{{").replace("}", "}}")


def input_key(name: str, idempotency_key: IdempotencyKey | None = None) -> IdempotencyKey:
    """``idempotency_key`` when given, else the default: the name and a digest of the input, so one
    run per input is live at a time (the name alone for an empty input)."""
    if idempotency_key is not None:
        return idempotency_key

    def key(**input: Any) -> str:
        if not input:
            return name
        return f"{name}:{hashlib.sha256(jsoncodec.dumps(input).encode()).hexdigest()[:32]}"

    return key
