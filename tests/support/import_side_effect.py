"""A module with an import side effect, named by a planted ``django_tasks`` row (issue 25): importing
it writes the file ``UJ_IMPORT_SIDE_EFFECT`` names. No test imports it; the refusal is that the file
never appears."""

from __future__ import annotations

import os
from pathlib import Path

_target = os.environ.get("UJ_IMPORT_SIDE_EFFECT")
if _target:
    Path(_target).write_text("imported\n")


def not_a_task(*args: object) -> None:
    """What the planted row names; never called."""
