"""Internal: a job's input as its declaration reads it — the parameters after ``ctx`` (the input's
schema), the templates rendered from an input (the idempotency key, the tenant, the
concurrency key) and ``NO_TENANT``, the tenant rule of a job that acts for no org. Every
refusal is ``X_JOB_DECLARATION_INVALID`` at declaration time, or ``X_JOB_INPUT_INVALID`` for an
input a template cannot render.
"""

from __future__ import annotations

import inspect
import re
import string
from collections.abc import Callable, Mapping
from typing import Any

from ultimate_jobs.errors import X_JOB_DECLARATION_INVALID, X_JOB_INPUT_INVALID, JobsError


class _NoTenant:
    """The marker for jobs that act for no tenant (global maintenance, fleet-wide work)."""

    _instance: _NoTenant | None = None

    def __new__(cls) -> _NoTenant:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NO_TENANT"

    def __reduce__(self) -> str:
        return "NO_TENANT"


NO_TENANT = _NoTenant()

# What @job takes as idempotency_key= and tenant=.
IdempotencyKey = str | Callable[..., str]
Tenant = str | Callable[..., str | int] | _NoTenant


class Template:
    """A format string over the input (``"invoice:{invoice_id}"``) or a ``callable(**input)``."""

    def __init__(self, spec: str | Callable[..., Any], *, option: str, params: Mapping[str, inspect.Parameter],
                 open_kwargs: bool) -> None:
        self.spec = spec
        self.option = option
        if isinstance(spec, str):
            fields = [f for _, f, _, _ in string.Formatter().parse(spec) if f is not None]
            for field_name in fields:
                root = re.split(r"[.\[]", field_name, maxsplit=1)[0]
                if not root or root.isdigit():
                    raise JobsError(X_JOB_DECLARATION_INVALID, f"{option}={spec!r} uses a positional field "
                                    "{" + field_name + "}.", "Name input fields, as in \"order:{order_id}\".")
                if root not in params and not open_kwargs:
                    raise JobsError(X_JOB_DECLARATION_INVALID, f"{option}={spec!r} names {root!r}, which is "
                                    "not an input of the job.", f"Use only the job's keyword arguments in {option}.")
        elif not callable(spec):
            raise JobsError(X_JOB_DECLARATION_INVALID, f"{option}={spec!r} is neither a format string nor a "
                            "callable.")

    def render(self, values: Mapping[str, Any]) -> Any:
        """The template applied to one input; the caller checks what a callable answered."""
        if isinstance(self.spec, str):
            try:
                return self.spec.format_map(values)
            except (KeyError, IndexError, AttributeError, ValueError) as exc:
                raise JobsError(X_JOB_INPUT_INVALID, f"{self.option}={self.spec!r} cannot be rendered from the "
                                f"input: {exc!r}.") from None
        return self.spec(**values)


def annotation_name(param: inspect.Parameter) -> str | None:
    """A parameter's annotation as the manifest (``JobHandle.describe()``) shows it; None when absent."""
    if param.annotation is inspect.Parameter.empty:
        return None
    return param.annotation if isinstance(param.annotation, str) else getattr(param.annotation, "__name__",
                                                                               repr(param.annotation))


def input_parameters(fn: Callable[..., Any], name: str) -> tuple[dict[str, inspect.Parameter], bool]:
    """The job's input parameters (everything after ``ctx``), and whether it takes ``**kwargs``."""
    if not callable(fn):
        raise JobsError(X_JOB_DECLARATION_INVALID, f"@job decorates {fn!r}, which is not a function.")
    params = list(inspect.signature(fn).parameters.values())
    if not params or params[0].kind not in (inspect.Parameter.POSITIONAL_ONLY,
                                           inspect.Parameter.POSITIONAL_OR_KEYWORD):
        raise JobsError(X_JOB_DECLARATION_INVALID, f"{name}: a job function takes the run context first: "
                        "def fn(ctx, *, ...).", "Add ctx as the first positional parameter.")
    inputs: dict[str, inspect.Parameter] = {}
    open_kwargs = False
    for param in params[1:]:
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            open_kwargs = True
        elif param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.POSITIONAL_ONLY):
            raise JobsError(X_JOB_DECLARATION_INVALID, f"{name}: input parameter {param.name!r} must be passable "
                            "by keyword.", "Declare inputs after a bare *: def fn(ctx, *, order_id).")
        else:
            inputs[param.name] = param
    return inputs, open_kwargs
