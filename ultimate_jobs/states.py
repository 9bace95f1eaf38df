"""Internal: the job states, spelled once.

The models (the state choices, the live-key index, the claim index), the stores' SQL
(``db/states.py`` renders these lists into every statement) and the operator views all read
these tuples. A plain module, importing nothing, so the core and the stores may read it
without the models.
"""

from __future__ import annotations

from typing import LiteralString

LIVE_STATES: tuple[LiteralString, ...] = ("ready", "delayed", "running", "suspended")  # hold the dedupe key
RUNNABLE_STATES: tuple[LiteralString, ...] = ("ready", "delayed", "suspended")  # a claim may take them
TERMINAL_STATES: tuple[LiteralString, ...] = ("done", "failed", "dead", "cancelled")  # finished
STATES = LIVE_STATES + TERMINAL_STATES
