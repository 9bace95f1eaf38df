"""``define_subject()``: declare the person once; the reach finds every table holding their data.

Usage::

    # members/jobs.py
    from ultimate_jobs import define_subject, subject_erase, subject_export

    member = define_subject(
        Member, key="member_id",                 # the input field holding the person's primary key
        tenant="org_id",                         # the member's org: a job for another org touches nothing
        tables={
            Member: {"anonymize": {"email": "erased@example.invalid", "name": ""}, "keep": ["status"]},
            Post: {"retain": "published work belongs to the org"},
            Comment: "delete",
            "members.Like": "delete",
        },
        columns={AuditCopy: "member_ref"})       # holds the key with no foreign key

    erase_member = subject_erase(name="members.erase", tenant="{org}", subject=member)
    export_member = subject_export(name="members.export", tenant="{org}", subject=member,
                                   storage=lambda: storages["exports"], prefix="subjects/{org}/{member_id}")

Arguments: ``model`` (the person's model), ``key`` (the input field naming the person's primary
key, or ``callable(**input)`` answering it), ``tables`` (every reached model, the subject's own
included, keyed by model or ``"app_label.Model"``: ``"delete"``, ``{"anonymize": {field: value}}``
or ``{"retain": "<why>"}``), ``columns`` (None: ``{model: field}`` for tables holding the key
without a foreign key, of any type: the key is cast to the column's; they are reached and need a
treatment too), ``tenant`` (None: the subject model's field path holding its tenant, ``"org_id"``
or ``"org__slug"``; with it an erase or export for another tenant's person ends
``X_JOB_TENANT_MISMATCH`` having touched nothing). An anonymize may add ``"keep": [fields]``: the
columns holding nothing personal (a status, the tenant), which ``subject_proof`` plants no canary in.

The reach: from ``model`` through every foreign key pointing at a reached model (unmanaged and
proxy models aside), continuing only through the subject and the tables the erase deletes. Nothing
defaults. Refused when declared (``X_SUBJECT_TREATMENT_INVALID``): a treatment of another shape, a
blank reason, an unknown field, ``None`` for a non-null field, the primary key anonymized, a table
the walk does not reach, and a kept row under a deleted parent (anonymize its key to ``None`` or
delete it), a ``keep`` naming an unknown or anonymized field, a ``tenant`` path that does not
resolve or whose field the subject's own treatment anonymizes; ``X_SUBJECT_CYCLE`` for a loop of
deleted tables with no nullable key. A reached model with no treatment is
``X_SUBJECT_TABLE_UNDECLARED``: reported by ``manage.py check`` (``ultimate_jobs.E010``), and an
erase or export refuses to start (terminal) until it has one.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.apps import apps
from django.core.exceptions import FieldDoesNotExist, FieldError
from django.db import models

from ultimate_jobs.errors import (
    X_SUBJECT_TABLE_UNDECLARED,
    X_SUBJECT_TREATMENT_INVALID,
    JobsError,
)
from ultimate_jobs.factories.subject.reach import Edge, Reach, label, walk

__all__ = ["Subject", "Treatment", "define_subject", "registered_subjects", "subject_jobs"]

_subjects: weakref.WeakSet[Subject] = weakref.WeakSet()
_jobs: weakref.WeakKeyDictionary[Any, Subject] = weakref.WeakKeyDictionary()

# A table as ``tables`` and ``columns`` name it: the model, or ``"app_label.Model"``.
TableName = type[models.Model] | str
# A treatment as written: ``"delete"``, ``{"anonymize": {field: value}}`` or ``{"retain": "<why>"}``.
TreatmentSpec = str | Mapping[str, object]


@dataclass(frozen=True, slots=True)
class Treatment:
    """``kind`` is ``delete``, ``anonymize`` (with ``values``, and ``keep``: the fields that hold
    nothing personal) or ``retain`` (with ``reason``)."""

    kind: str
    values: dict[str, Any] = field(default_factory=dict)
    reason: str = ""
    keep: tuple[str, ...] = ()


class Subject:
    """A declared person: the model, how an input names them, and a treatment per reached table.
    ``reach()`` walks the metadata (once the app registry is ready) and validates."""

    def __init__(self, model: type[models.Model], key: str | Callable[..., object],
                 tables: Mapping[TableName, TreatmentSpec], columns: Mapping[TableName, str] | None,
                 tenant: str | None = None) -> None:
        self.model = model
        self.key = key
        self.tenant = tenant
        self._tables = dict(tables)
        self._columns = dict(columns or {})

    def __repr__(self) -> str:
        return f"<Subject {label(self.model)}>"

    def key_of(self, input: Mapping[str, Any]) -> Any:
        return self.key(**input) if callable(self.key) else input[self.key]

    @functools.cached_property
    def tenant_field(self) -> Any:
        """The subject's own field the ``tenant`` path starts from (``org`` of ``"org__slug"``), or None."""
        if self.tenant is None:
            return None
        return self.model._meta.get_field(self.tenant.split("__", 1)[0])

    def tenant_of(self, key: object) -> tuple[bool, object]:
        """``(found, tenant)``: whether the subject's row exists, and the value its ``tenant`` path holds."""
        assert self.tenant is not None
        found = list(self.model._default_manager.filter(pk=key).values_list(self.tenant, flat=True)[:1])
        return (True, found[0]) if found else (False, None)

    @functools.cached_property
    def treatments(self) -> dict[Any, Treatment]:
        return {resolve(name, "tables"): parse_treatment(name, value) for name, value in self._tables.items()}

    @functools.cached_property
    def columns(self) -> dict[Any, str]:
        found = {}
        for name, column in self._columns.items():
            model = resolve(name, "columns")
            try:
                model._meta.get_field(column)
            except FieldDoesNotExist:
                raise _invalid(f"columns names {label(model)}.{column}, which does not exist.") from None
            found[model] = column
        return found

    def reach(self) -> Reach:
        """The walk, validated (raises the declaration's refusals); ``unknown`` lists undeclared models."""
        return self._reach

    @functools.cached_property
    def _reach(self) -> Reach:
        treatments = self.treatments
        reach = walk(self.model, lambda m: None if m not in treatments else treatments[m].kind == "delete",
                     self.columns)
        for model, treatment in treatments.items():
            if model not in reach.models:
                raise _invalid(f"tables names {label(model)}, which the walk from {label(self.model)} does not "
                               "reach (no foreign key to a deleted table or the subject).")
            check_fields(model, treatment)
        for edge in [*reach.edges, *reach.clears]:
            check_kept_under_deleted(edge, treatments, self.model)
        self._check_tenant()
        return reach

    def _check_tenant(self) -> None:
        """The ``tenant`` path resolves from the subject's model, and the subject's treatment leaves
        its field alone (an erase replayed after anonymizing it would read another tenant)."""
        if self.tenant is None:
            return
        try:
            self.model._default_manager.values_list(self.tenant)
            first = self.tenant_field
        except (FieldDoesNotExist, FieldError):
            raise _invalid(f"tenant={self.tenant!r} names no field path of {label(self.model)}.",
                           'Name the subject\'s field holding its tenant: tenant="org_id" or "org__slug".') from None
        treatment = self.treatments.get(self.model)
        if treatment is not None and {first.name, first.attname} & set(treatment.values):
            raise _invalid(f"{label(self.model)} anonymizes {first.name}, the subject's tenant={self.tenant!r}: a "
                           "replayed erase could no longer tell whose person it is.",
                           f'List {first.name!r} in the treatment\'s "keep" instead.')

    def undeclared(self) -> list[str]:
        """Labels of reached models with no treatment."""
        reach = self.reach()
        return sorted({label(m) for m in [*reach.unknown, *reach.models] if m not in self.treatments})

    def refuse_undeclared(self) -> None:
        missing = self.undeclared()
        if missing:
            raise JobsError(X_SUBJECT_TABLE_UNDECLARED, f"the subject {label(self.model)} reaches "
                            f"{', '.join(missing)}, with no treatment declared.")


def define_subject(model: type[models.Model], key: str | Callable[..., object],
                   tables: Mapping[TableName, TreatmentSpec],
                   columns: Mapping[TableName, str] | None = None, tenant: str | None = None) -> Subject:
    """Declare one person's data; see the module docstring for the reach and every refusal."""
    if not (isinstance(model, type) and issubclass(model, models.Model)):
        raise _invalid(f"model={model!r} is not a Django model.")
    if not (callable(key) or (isinstance(key, str) and key)):
        raise _invalid(f"key={key!r} is neither an input field name nor a callable(**input).")
    if not isinstance(tables, Mapping) or not tables:
        raise _invalid(f"tables={tables!r} is not a mapping of model -> treatment.")
    if columns is not None and not isinstance(columns, Mapping):
        raise _invalid(f"columns={columns!r} is not a mapping of model -> field name.")
    if tenant is not None and not (isinstance(tenant, str) and tenant):
        raise _invalid(f"tenant={tenant!r} is not a field path of the subject's model.",
                       'Pass tenant="org_id" (or "org__slug"), or leave it out for an app without tenants.')
    for name, value in tables.items():
        parse_treatment(name, value)  # the shapes need no registry: refuse them now
    subject = Subject(model, key, tables, columns, tenant)
    if apps.ready:
        subject.reach()
    _subjects.add(subject)
    return subject


def registered_subjects() -> list[Subject]:
    """Every subject declared in this process and still referenced (``manage.py check`` walks each)."""
    return list(_subjects)


def note_subject_job(handle: Any, subject: Subject) -> None:
    """Remember which subject a ``subject_erase``/``subject_export`` handle serves (for the check)."""
    _jobs[handle] = subject


def subject_jobs() -> list[tuple[Any, Subject]]:
    """Every declared subject job still referenced, with its subject."""
    return list(_jobs.items())


def forget_subject(subject: Subject) -> None:
    """Drop a subject from the check's list (tests that declare one for themselves)."""
    _subjects.discard(subject)


def resolve(name: object, option: str) -> Any:
    if isinstance(name, type) and issubclass(name, models.Model):
        return name
    if isinstance(name, str):
        try:
            return apps.get_model(name)
        except (LookupError, ValueError):
            pass
    raise _invalid(f"{option} names {name!r}, which is not a model or an installed \"app_label.Model\".")


def parse_treatment(name: TableName, value: object) -> Treatment:
    where = f"the treatment of {name if isinstance(name, str) else label(name)}"
    if value == "delete":
        return Treatment("delete")
    if isinstance(value, Mapping) and "keep" in value and set(value) == {"anonymize", "keep"}:
        keep = value["keep"]
        if isinstance(keep, str) or not isinstance(keep, list | tuple) or not all(
                isinstance(f, str) and f for f in keep):
            raise _invalid(f"{where} keeps {keep!r}; keep lists field names, as in \"keep\": [\"status\"].")
        anonymized = parse_treatment(name, {"anonymize": value["anonymize"]})
        return Treatment("anonymize", values=anonymized.values, keep=tuple(keep))
    if not isinstance(value, Mapping) or len(value) != 1:
        raise _invalid(f"{where} is {value!r}; it must be \"delete\", {{\"anonymize\": {{...}}}} (with an "
                       "optional \"keep\": [fields]) or {\"retain\": \"<why>\"}.")
    ((kind, detail),) = value.items()
    if kind == "retain":
        if not isinstance(detail, str) or not detail.strip():
            raise _invalid(f"{where} retains with reason {detail!r}; a retain states why, in words.")
        return Treatment("retain", reason=detail.strip())
    if kind == "anonymize":
        if not isinstance(detail, Mapping) or not detail:
            raise _invalid(f"{where} anonymizes {detail!r}; it must map field names to their new values.")
        return Treatment("anonymize", values=dict(detail))
    raise _invalid(f"{where} is {value!r}; {kind!r} is not delete, anonymize or retain.")


def check_fields(model: Any, treatment: Treatment) -> None:
    anonymized: set[str] = set()
    for name, value in treatment.values.items():
        try:
            found = model._meta.get_field(name)
        except FieldDoesNotExist:
            found = None
        if found is None or not getattr(found, "concrete", False):
            raise _invalid(f"{label(model)} has no field {name!r} to anonymize.")
        if found.primary_key:
            raise _invalid(f"{label(model)}.{name} is the primary key; anonymize other fields, or delete the row.")
        if value is None and not found.null:
            raise _invalid(f"{label(model)}.{name} is not nullable, so it cannot be anonymized to None.")
        anonymized |= {found.name, found.attname}
    for name in treatment.keep:
        try:
            kept = model._meta.get_field(name)
        except FieldDoesNotExist:
            kept = None
        if kept is None or not getattr(kept, "concrete", False):
            raise _invalid(f"{label(model)} has no field {name!r} to keep.")
        if {kept.name, kept.attname} & anonymized:
            raise _invalid(f"{label(model)}.{name} is both anonymized and kept; a field is one or the other.")


def check_kept_under_deleted(edge: Edge, treatments: dict[Any, Treatment], subject: Any) -> None:
    """A kept row whose foreign key points at a deleted row would block the delete or be cascaded
    away: its key must be anonymized to None."""
    parent, child = treatments.get(edge.parent), treatments.get(edge.child)
    if not edge.foreign_key or parent is None or child is None or parent.kind != "delete":
        return
    cleared = any(name in child.values and child.values[name] is None for name in (edge.field_name, edge.field))
    if child.kind == "delete" or cleared:
        return
    raise _invalid(f"{label(edge.child)} is kept ({child.kind}) but its {edge.field_name} points at "
                   f"{label(edge.parent)}, which is deleted.",
                   f'Treat {label(edge.child)} as "delete", or anonymize {edge.field_name} to None.')


def _invalid(cause: str, fix: str | None = None) -> JobsError:
    return JobsError(X_SUBJECT_TREATMENT_INVALID, cause, fix)
