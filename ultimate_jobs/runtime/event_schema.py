"""Internal: ``wait_for_event(..., schema=)`` — the payload a wait answers, checked first.

``schema`` is either a Django ``Form`` class, bound to the payload as an HTTP form is to POST
data (the wait answers ``form.cleaned_data``: the fields coerced, ``"42"`` an ``int`` for an
``IntegerField``), or any other callable validator ``schema(payload) -> value`` (the wait answers
what it returns, so ``MyModel.model_validate`` or a function of your own fits) that refuses by
raising ``django.core.exceptions.ValidationError``, ``ValueError`` (pydantic's
``ValidationError`` is one) or ``TypeError``. A refused payload ends the run terminally
(``X_JOB_EVENT_INVALID``): the payload is stored as the step's output first, so an operator sees
what arrived, and a replay checks the stored payload again (a retry after the schema was fixed
answers it). A timeout (``None``) is never checked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from django import forms
from django.core.exceptions import ValidationError

from ultimate_jobs.errors import X_JOB_DECLARATION_INVALID, X_JOB_EVENT_INVALID, Terminal

Schema = type[forms.BaseForm] | Callable[[Any], Any]
# The step engine's latch: records a terminal error so the run ends with it even if the body
# catches it, and answers it to raise.
Latch = Callable[[BaseException], BaseException]


def check(schema: object, *, step: str, latch: Latch) -> None:
    """Refuse a ``schema`` that is neither a ``Form`` class nor callable (``X_JOB_DECLARATION_INVALID``)."""
    if schema is not None and not callable(schema):
        raise latch(Terminal(f"wait_for_event({step!r}): schema={schema!r:.80} is neither a Django Form class nor "
                             "a callable.", code=X_JOB_DECLARATION_INVALID,
                             fix="Pass schema=MyForm (a django.forms.Form) or schema=validate (payload -> value)."))


def answer(schema: Schema | None, payload: Any, *, step: str, event: str, latch: Latch) -> Any:
    """What the wait answers for ``payload`` under ``schema``; raise terminal ``X_JOB_EVENT_INVALID``
    (latched) for a payload the schema refuses."""
    if schema is None or payload is None:
        return payload
    if isinstance(schema, type) and issubclass(schema, forms.BaseForm):
        form = schema(data=payload)
        if form.is_valid():
            return form.cleaned_data
        problems = "; ".join(f"{field}: {' '.join(str(m) for m in messages)}"
                             for field, messages in form.errors.items())
        raise latch(_refused(step, event, problems))
    validate = cast(Callable[[Any], Any], schema)
    try:
        return validate(payload)
    except (ValidationError, ValueError, TypeError) as exc:
        raise latch(_refused(step, event, f"{type(exc).__name__}: {exc}")) from None


def _refused(step: str, event: str, problems: str) -> Terminal:
    return Terminal(f"wait_for_event({step!r}): the {event!r} payload it received is refused by its schema "
                    f"({problems}).", code=X_JOB_EVENT_INVALID)
