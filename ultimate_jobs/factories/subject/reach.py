"""Internal: the reach of one person's data, walked from Django's model metadata.

From the subject's model, every foreign key pointing at a reached model adds its model to the
reach — but the walk continues only through the subject and through tables the erase DELETES: the
likes on a retained post are not the person's, the likes on a deleted one go with it. ``columns``
adds tables that hold the subject's key without a foreign key.

A loop of deleted tables cannot be deleted children-first; one nullable key in it is cleared
first (set to NULL on the rows pointing into the reach) and the loop is cut there. The first edge
that reached each model (a breadth-first tree) is never cut, so every model stays reachable.
"""

from __future__ import annotations

import graphlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.apps import apps
from django.db import models

from ultimate_jobs.errors import X_SUBJECT_CYCLE, JobsError


@dataclass(frozen=True, slots=True)
class Edge:
    """``child.field`` holds ``parent.target`` (attnames); ``field_name`` is the field's name."""

    child: Any
    field: str
    field_name: str
    parent: Any
    target: str
    nullable: bool
    foreign_key: bool


@dataclass(frozen=True, slots=True)
class Reach:
    """The reached models (walk order, subject first), the edges that define each model's rows,
    the edges cleared first, and the erase order (children first, the subject last)."""

    models: list[Any]
    edges: list[Edge]
    clears: list[Edge]
    order: list[Any]
    unknown: list[Any]  # reached models without a treatment (the walk stopped at them)


def label(model: type[models.Model]) -> str:
    return model._meta.label


def foreign_keys_to(parent: Any) -> list[Edge]:
    """Every foreign key (or one-to-one) of an installed, concrete model pointing at ``parent``."""
    found = []
    for model in apps.get_models(include_auto_created=True):
        if model._meta.proxy or not model._meta.managed:
            continue  # an unmanaged model is a view or another app's table: nothing the erase may write
        for field in model._meta.concrete_fields:
            remote = getattr(field, "remote_field", None)
            if not isinstance(field, models.ForeignKey) or remote is None:
                continue
            if remote.model._meta.concrete_model is parent._meta.concrete_model:
                found.append(Edge(model, field.attname, field.name, parent, field.target_field.attname,
                                  field.null, True))
    return found


def walk(subject: Any, walks_through: Callable[[Any], bool | None], columns: dict[Any, str]) -> Reach:
    """Walk from ``subject``; ``walks_through(model)`` says whether the erase deletes it (None: no
    treatment, so the walk cannot know and stops there)."""
    reached = [subject]
    tree: set[Edge] = set()
    edges: list[Edge] = []
    unknown: list[Any] = []
    queue = [subject]
    while queue:
        parent = queue.pop(0)
        if parent is not subject:
            through = walks_through(parent)
            if through is None:
                unknown.append(parent)
                continue
            if not through:
                continue
        found = foreign_keys_to(parent)
        if parent is subject:
            pk = subject._meta.pk.attname
            found += [Edge(model, model._meta.get_field(column).attname, column, subject, pk, True, False)
                      for model, column in columns.items()]
        for edge in found:
            if edge.child is subject and edge.parent is subject and not walks_through(subject):
                continue  # a kept subject row pointing at another person: not this person's data
            edges.append(edge)
            if edge.child not in reached:
                reached.append(edge.child)
                queue.append(edge.child)
                tree.add(edge)
    kept, clears = cut_loops(edges, tree)
    order = erase_order(reached, kept, subject)
    return Reach(models=reached, edges=kept, clears=clears, order=order, unknown=unknown)


def cut_loops(edges: list[Edge], tree: set[Edge]) -> tuple[list[Edge], list[Edge]]:
    """Remove one nullable non-tree edge from each loop until none is left."""
    kept = list(edges)
    clears: list[Edge] = []
    while (loop := find_loop(kept)) is not None:
        cuttable = [e for e in loop if e.nullable and e not in tree]
        if not cuttable:
            names = " -> ".join(f"{label(e.child)}.{e.field_name}" for e in loop)
            raise JobsError(X_SUBJECT_CYCLE, f"the deleted tables form a loop with no nullable key to clear first: "
                            f"{names}.")
        kept.remove(cuttable[0])
        clears.append(cuttable[0])
    return kept, clears


def find_loop(edges: list[Edge]) -> list[Edge] | None:
    """The edges of one loop (child -> parent), or None."""
    out: dict[Any, list[Edge]] = {}
    for edge in edges:
        out.setdefault(edge.child, []).append(edge)
    state: dict[Any, int] = {}
    path: list[Edge] = []

    def visit(node: Any) -> list[Edge] | None:
        state[node] = 1
        for edge in out.get(node, []):
            if state.get(edge.parent) == 1:
                start = next((i for i, e in enumerate(path) if e.child is edge.parent), len(path))
                return [*path[start:], edge]
            if edge.parent not in state:
                path.append(edge)
                found = visit(edge.parent)
                if found is not None:
                    return found
                path.pop()
        state[node] = 2
        return None

    for node in list(out):
        if node not in state:
            found = visit(node)
            if found is not None:
                return found
    return None


def erase_order(reached: list[Any], edges: list[Edge], subject: Any) -> list[Any]:
    """Children before parents, the subject last."""
    sorter: graphlib.TopologicalSorter[Any] = graphlib.TopologicalSorter()
    for model in reached:
        sorter.add(model)
    for edge in edges:
        if edge.child is not edge.parent:
            sorter.add(edge.parent, edge.child)
    order = [m for m in sorter.static_order() if m is not subject]
    return [*order, subject]
