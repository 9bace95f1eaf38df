"""Internal: the job states as SQL, rendered once from ``ultimate_jobs/states.py``.

The live-key index (``models/jobs.py``), the enqueue's ``ON CONFLICT`` target, the live-row
lookup and the claim must name the same states, or the dedupe and the claim drift apart from
the index they rely on; every statement interpolates these lists at import time.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import LiteralString

from ultimate_jobs.states import LIVE_STATES, RUNNABLE_STATES, TERMINAL_STATES


def _sql_list(states: Iterable[LiteralString]) -> LiteralString:
    return "(" + ", ".join(f"'{state}'" for state in states) + ")"


LIVE: LiteralString = _sql_list(LIVE_STATES)  # ('ready', 'delayed', 'running', 'suspended')
RUNNABLE: LiteralString = _sql_list(RUNNABLE_STATES)  # what a claim may take
TERMINAL: LiteralString = _sql_list(TERMINAL_STATES)  # what a settle stamps finished_at on

# The jobs of one run, in the two places they are indexed (0013_write_path): a run's first job
# carries its own id as its run id and is found by the primary key; a job that joined another run
# (``using(run_id=...)``) is in the run-member index, whose predicate the second form repeats so the
# planner may walk it. Rows written before 0013 all have run_id <> id: the second form finds them.
# ``{job}`` is the job table's alias, ``{run}`` the run id asked for.
RUN_FIRST: LiteralString = "({job}.id = {run} AND {job}.run_id = {job}.id)"
RUN_JOINED: LiteralString = "({job}.run_id = {run} AND {job}.run_id <> {job}.id)"
