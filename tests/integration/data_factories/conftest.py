"""Helpers for the data-factory tests: a real file storage under the test's tmp dir, and
declarations forgotten when the test ends."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.files.storage import FileSystemStorage

from tests.conftest import Declared


@pytest.fixture
def storage(tmp_path: Path) -> FileSystemStorage:
    return FileSystemStorage(location=str(tmp_path / "objects"))


@pytest.fixture(autouse=True)
def _forget_subjects() -> Iterator[None]:
    """A subject a test declares is not checked by ``manage.py check`` in later tests."""
    from ultimate_jobs.factories.subject.declaration import forget_subject, registered_subjects

    before = set(map(id, registered_subjects()))
    yield
    for subject in registered_subjects():
        if id(subject) not in before:
            forget_subject(subject)


@pytest.fixture
def track(declared: Declared) -> Callable[[Any], Any]:
    """``track(handle)``: forget a factory's job when the test ends."""
    return declared.track


def object_names(storage: FileSystemStorage, prefix: str) -> list[str]:
    """Every object under ``prefix`` (recursively), sorted."""
    root = Path(storage.location)
    return sorted(str(p.relative_to(root)) for p in (root / prefix).rglob("*") if p.is_file())
