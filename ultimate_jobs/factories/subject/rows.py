"""Internal: which rows of a reached model are the person's, as a QuerySet the database resolves.

A model's rows are those whose foreign key (or ``columns`` field) holds a key of a reached row of
its parent, through every edge that defines the reach: nested subqueries, so nothing is held in
memory, and a page of parent keys is read at a time by keyset (never OFFSET). A ``columns`` table's
key column may have another type than the subject's key: the subquery casts the key to the column's
own field (``Cast``), which PostgreSQL needs (``varchar = bigint`` has no operator); a page of keys
is converted by the column's field as the filter prepares it.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Manager, Model, Q, QuerySet
from django.db.models.functions import Cast

from ultimate_jobs import jsoncodec
from ultimate_jobs.factories.subject.reach import Edge, Reach


def rows_of(reach: Reach, model: type[Model], key: object, subject: type[Model]) -> QuerySet[Model]:
    """The person's rows of ``model``."""
    manager: Manager[Model] = model._default_manager
    if model is subject:
        return manager.filter(pk=key)
    condition = Q()
    for edge in reach.edges:
        if edge.child is model and edge.child is not edge.parent:
            parent_rows = rows_of(reach, edge.parent, key, subject)
            if edge.foreign_key:
                keys = parent_rows.values(edge.target)
            else:  # a ``columns`` key may have another type (a CharField holding an integer id): cast it
                column = model._meta.get_field(edge.field_name).clone()
                keys = parent_rows.values(subject_key_as_column=Cast(edge.target, output_field=column))
            condition |= Q(**{f"{edge.field}__in": keys})
    return manager.filter(condition) if condition else manager.none()


def parent_keys(reach: Reach, edge: Edge, key: object, subject: type[Model], *, after: object,
                size: int) -> list[Any]:
    """One page of the keys ``edge.child.field`` may hold: the parent's reached rows' ``target``."""
    keys = rows_of(reach, edge.parent, key, subject).order_by(edge.target).values_list(edge.target, flat=True)
    if after is not None:
        keys = keys.filter(**{f"{edge.target}__gt": after})
    return list(keys[:size])


def stored(value: Any) -> Any:
    """A key as a step stores it (JSON)."""
    return jsoncodec.loads(jsoncodec.dumps(value))
