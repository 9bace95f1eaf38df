"""Internal: what the management commands share."""

from __future__ import annotations

import logging
from typing import Any


def log_to_stderr(command: Any, verbosity: int) -> None:
    """Send the ``ultimate_jobs`` logger to the command's stderr: warnings at ``-v 1``, info from ``-v 2``.

    Left alone when the project configured a handler for it already.
    """
    logger = logging.getLogger("ultimate_jobs")
    if verbosity < 1 or logger.handlers:
        return
    handler = logging.StreamHandler(command.stderr._out)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO if verbosity >= 2 else logging.WARNING)
