"""Management commands run in-process the way manage.py runs them: the exit code (``SystemExit``),
stdout and stderr. ``cli`` is ``jobs``; ``run_command`` is any other (``jobs_backfill``)."""

from __future__ import annotations

from io import StringIO

from django.core.management import call_command


def run_command(name: str, *args: str) -> tuple[int, str, str]:
    out, err = StringIO(), StringIO()
    try:
        call_command(name, *args, stdout=out, stderr=err)
        code = 0
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    return code, out.getvalue(), err.getvalue()


def cli(*args: str) -> tuple[int, str, str]:
    return run_command("jobs", *args)
