"""Internal: what the management commands share: the raw output streams and stderr logging."""

from __future__ import annotations

import logging
from typing import TextIO, cast

from django.core.management.base import BaseCommand, OutputWrapper


def raw_stream(wrapper: OutputWrapper) -> TextIO:
    """The stream a command's ``self.stdout``/``self.stderr`` wraps: written to as it is, without the
    wrapper's added line endings and styles (the stubs do not know the wrapper's ``_out``)."""
    return cast(TextIO, wrapper._out)


def log_to_stderr(command: BaseCommand, verbosity: int) -> None:
    """Send the ``ultimate_jobs`` logger to the command's stderr: warnings at ``-v 1``, info from ``-v 2``.

    Left alone when the project configured a handler for it already.
    """
    logger = logging.getLogger("ultimate_jobs")
    if verbosity < 1 or logger.handlers:
        return
    handler = logging.StreamHandler(raw_stream(command.stderr))
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO if verbosity >= 2 else logging.WARNING)
