"""The contract suite covers the whole protocol, and both stores implement it alike."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import tests.store_contract
from tests.store_contract import COVERED
from ultimate_jobs.db.store import Store
from ultimate_jobs.states import LIVE_STATES, RUNNABLE_STATES

METHODS = sorted(name for name, value in vars(Store).items() if inspect.isfunction(value) and not name.startswith("_"))


def _stores() -> list[type]:
    from ultimate_jobs.db.postgres import PostgresStore
    from ultimate_jobs.db.sqlite import SqliteStore

    return [PostgresStore, SqliteStore]


def test_every_store_method_is_called_by_a_contract_test() -> None:
    for module in pkgutil.iter_modules(tests.store_contract.__path__):
        if module.name.startswith("test_"):
            importlib.import_module(f"tests.store_contract.{module.name}")
    assert len(METHODS) == 33
    assert sorted(set(METHODS) - COVERED) == []
    assert sorted(COVERED - set(METHODS)) == []


@pytest.mark.parametrize("store_type", _stores(), ids=lambda t: t.__name__)
def test_each_store_implements_every_method_with_the_protocols_keywords(store_type: type) -> None:
    for name in METHODS:
        expected = inspect.signature(getattr(Store, name))
        actual = inspect.signature(getattr(store_type, name))
        assert list(actual.parameters) == list(expected.parameters), name
        for parameter in list(actual.parameters.values())[1:]:
            assert parameter.kind is inspect.Parameter.KEYWORD_ONLY, (name, parameter.name)
            assert parameter.default == expected.parameters[parameter.name].default, (name, parameter.name)


def test_both_stores_spell_the_models_live_and_runnable_states() -> None:
    from ultimate_jobs.db import postgres, sqlite
    from ultimate_jobs.db.sqlite import jobs as sqlite_jobs

    live = "state IN (" + ", ".join(f"'{s}'" for s in LIVE_STATES) + ")"
    runnable = "state IN (" + ", ".join(f"'{s}'" for s in RUNNABLE_STATES) + ")"
    assert sqlite is not None
    for statement in (postgres.JOB_INSERT_MANY, postgres.JOB_INSERT_ONE, postgres.JOB_LIVE_BY_KEY,
                      sqlite_jobs.JOB_INSERT_MANY, sqlite_jobs.JOB_LIVE_BY_KEY):
        assert live in statement
    assert runnable in sqlite_jobs.JOB_CLAIM
    # PostgreSQL's claim walks `ready` rows and due `delayed`/`suspended` rows apart (two partial
    # indexes, 0010_queue_performance): together exactly the runnable states.
    assert "c.state = 'ready'" in postgres.JOB_CLAIM and "d.state IN ('delayed', 'suspended')" in postgres.JOB_CLAIM
    assert set(RUNNABLE_STATES) == {"ready", "delayed", "suspended"}
