"""``jobs`` run in-process the way manage.py runs it: its exit code (``SystemExit``), stdout, stderr."""

from __future__ import annotations

from io import StringIO

from django.core.management import call_command


def cli(*args: str) -> tuple[int, str, str]:
    out, err = StringIO(), StringIO()
    try:
        call_command("jobs", *args, stdout=out, stderr=err)
        code = 0
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    return code, out.getvalue(), err.getvalue()
