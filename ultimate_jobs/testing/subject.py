"""``subject_proof(subject)``: prove a ``define_subject`` declaration erases what it says.

Usage (in a test with database access)::

    from ultimate_jobs.testing import subject_proof

    @pytest.mark.django_db(transaction=True)
    def test_member_erase_leaves_nothing():
        report = subject_proof(member)          # raises X_SUBJECT_ERASE_INCOMPLETE on a leak
        assert report["tables"]["members.Comment"] == 1

It plants one generated person: a row in every reached table along every foreign key of the reach,
each text column holding a canary (a random token) — except the columns that hold nothing
personal: an anonymize's ``keep``, the subject's ``tenant`` field, primary and foreign keys — other
required columns filled with plain values (rows of unreached tables a key needs are filler, without
canaries). A subject with a ``tenant`` is erased under the generated person's own tenant. It erases that person
with the real erase job (``run_job``, in this process) and then searches every text column of every
installed model (``ultimate_jobs``' own tables aside: queued inputs are out of reach) for the token.
A canary found outside a table the subject retains is ``X_SUBJECT_ERASE_INCOMPLETE``, naming the
table and column. ``input`` (None: ``{key: pk}`` when the subject's key is an input field name)
builds the erase's input from the generated person's primary key. Answers ``{"token", "key",
"tables": {label: rows planted}, "retained": {label: [columns holding a canary]}}``.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.apps import apps
from django.db import models
from django.utils import timezone

from ultimate_jobs.errors import X_INVARIANT, X_SUBJECT_ERASE_INCOMPLETE, JobsError
from ultimate_jobs.factories.subject.declaration import Subject
from ultimate_jobs.factories.subject.erase import subject_erase
from ultimate_jobs.factories.subject.reach import label
from ultimate_jobs.inputs import NO_TENANT, Tenant
from ultimate_jobs.registry import unregister as _unregister

__all__ = ["find_token", "prove"]

_TEXT = (models.CharField, models.TextField)


def prove(subject: Subject, *, run_job: Callable[..., Any],
          input: Callable[[Any], dict[str, Any]] | None = None) -> dict[str, Any]:
    """Plant canaries in every reached table, erase the person with ``run_job``, search every row;
    ``ultimate_jobs.testing.subject_proof`` hands it the in-process runner (see the module)."""
    subject.refuse_undeclared()
    reach = subject.reach()
    token = "canary" + secrets.token_hex(6)
    planter = _Planter(token, plain={model: plain_columns(subject, model) for model in reach.models})
    planted: dict[Any, list[Any]] = {subject.model: [planter.make(subject.model, canary=True)]}
    counts = {label(subject.model): 1}
    for model in reach.models[1:]:  # walk order: a parent is planted before its children
        for edge in (e for e in reach.edges if e.child is model):
            for parent in planted.get(edge.parent, [])[:1]:
                row = planter.make(model, canary=True, fixed={edge.field: getattr(parent, edge.target)})
                planted.setdefault(model, []).append(row)
                counts[label(model)] = counts.get(label(model), 0) + 1
    for edge in reach.clears:  # a row on the cut key too, so clearing it is exercised
        for parent in planted.get(edge.parent, [])[:1]:
            for child in planted.get(edge.child, [])[:1]:
                edge.child._default_manager.filter(pk=child.pk).update(**{edge.field: getattr(parent, edge.target)})
    pk = planted[subject.model][0].pk
    if input is None:
        if not isinstance(subject.key, str):
            raise JobsError(X_INVARIANT, "the subject's key is a callable; subject_proof cannot guess its input.",
                            "Pass subject_proof(subject, input=lambda pk: {...}).")
        input = lambda value: {subject.key: value}  # noqa: E731 - the key is an input field name
    tenant: Tenant = NO_TENANT
    if subject.tenant is not None:  # the erase acts for the generated person's own tenant
        owner = str(subject.tenant_of(pk)[1])
        tenant = lambda **_: owner  # noqa: E731 - a constant tenant rule over any input
    handle = subject_erase(name=f"ultimate_jobs.subject_proof.{token}", tenant=tenant, subject=subject)
    try:
        trace = run_job(handle, **input(pk))
    finally:
        _unregister(handle.name)
    if trace.state != "done":
        raise JobsError(X_SUBJECT_ERASE_INCOMPLETE, f"the erase ended {trace.state}: {trace.last_error}")
    retained = {label(m) for m, t in subject.treatments.items() if t.kind == "retain"}
    kept: dict[str, list[str]] = {}
    for model, column in find_token(token):
        if label(model) in retained:
            kept.setdefault(label(model), []).append(column)
            continue
        raise JobsError(X_SUBJECT_ERASE_INCOMPLETE, f"after the erase, {label(model)}.{column} "
                        f"({model._meta.db_table}.{column}) still holds the person's canary, and "
                        f"{label(model)} is not retained.")
    return {"token": token, "key": pk, "tables": counts, "retained": kept}


def plain_columns(subject: Subject, model: Any) -> set[str]:
    """The columns of a reached model that get no canary: its treatment's ``keep`` and, on the
    subject's own model, the ``tenant`` field (foreign keys and primary keys never get one)."""
    treatment = subject.treatments.get(model)
    names = set(treatment.keep) if treatment is not None else set()
    if model is subject.model and subject.tenant_field is not None:
        names.add(subject.tenant_field.name)
    return {model._meta.get_field(name).attname for name in names}


def find_token(token: str) -> list[tuple[Any, str]]:
    """Every (model, column) of an installed model (not ultimate_jobs') with a row holding ``token``."""
    found = []
    for model in apps.get_models(include_auto_created=True):
        if model._meta.app_label == "ultimate_jobs" or model._meta.proxy or not model._meta.managed:
            continue
        for field in model._meta.concrete_fields:
            if isinstance(field, _TEXT) and model._default_manager.filter(
                    **{f"{field.attname}__contains": token}).exists():
                found.append((model, field.attname))
    return found


class _Planter:
    """Builds rows with every required column filled: canaries in text for reached tables."""

    def __init__(self, token: str, plain: dict[Any, set[str]]) -> None:
        self.token = token
        self.plain = plain
        self.serial = 0

    def make(self, model: Any, *, canary: bool, fixed: dict[str, Any] | None = None) -> Any:
        values: dict[str, Any] = {}
        for field in model._meta.concrete_fields:
            if field.primary_key and (field.has_default() or isinstance(field, models.AutoField)):
                continue
            if fixed and field.attname in fixed:
                values[field.attname] = fixed[field.attname]
            elif isinstance(field, models.ForeignKey):
                values[field.attname] = None if field.null else self.make(
                    field.remote_field.model, canary=False).pk
            else:
                values[field.attname] = self.value(field, canary and not field.primary_key
                                                   and field.attname not in self.plain.get(model, ()))
        return model._default_manager.create(**values)

    def value(self, field: Any, canary: bool) -> Any:
        self.serial += 1
        if field.choices:
            return field.choices[0][0]
        if isinstance(field, _TEXT):
            text = f"{self.token}-{field.name}-{self.serial}" if canary else f"filler-{self.serial}"
            if isinstance(field, models.EmailField):
                text = f"{text}@example.invalid"
            return text[:field.max_length] if field.max_length else text
        if field.has_default():
            return field.get_default()
        if field.null:
            return None
        if isinstance(field, models.BooleanField):
            return False
        if isinstance(field, models.DecimalField):
            return Decimal(self.serial % 10)
        if isinstance(field, models.IntegerField | models.FloatField):
            return self.serial
        if isinstance(field, models.DateTimeField):
            return timezone.now()
        if isinstance(field, models.DateField):
            return date.today()
        if isinstance(field, models.TimeField):
            return time(0, 0)
        if isinstance(field, models.DurationField):
            return timedelta(0)
        if isinstance(field, models.UUIDField):
            import uuid
            return uuid.uuid4()
        if isinstance(field, models.JSONField):
            return {}
        return datetime.now().isoformat()
