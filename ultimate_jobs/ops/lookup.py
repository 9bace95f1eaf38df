"""Internal: an id as an operator types it — whole, its first characters, or the short form the
admin and the CLI show — resolved to one job id; re-exported by ``ultimate_jobs.ops``.

The short form is the first 8 and the last 4 hex digits, ``01a23171…3bc2`` (``...`` works too):
a UUIDv7 starts with its millisecond timestamp, so the first 8 characters alone are the same for
every job made in the same ~65 seconds, while the tail is random. A prefix is a range on the
primary key (the index answers it); a short form is that range, then the tail compared.

Usage::

    ops.resolve_job_id("01a23171-458e")       # -> "01a23171-458e-7a1c-9d2f-3bc2e45f0a11"
    ops.resolve_job_id("01a23171…3bc2")       # the same job
    ops.matching_job_ids("01a2", limit=10)   # every match, up to limit

Raises ``X_ID_INVALID`` for text that is not hex, ``X_JOB_NOT_FOUND`` when nothing matches,
``X_ID_AMBIGUOUS`` (listing up to ``SHOWN`` matches) when more than one job does.
"""

from __future__ import annotations

import re

from ultimate_jobs.errors import X_ID_AMBIGUOUS, X_ID_INVALID, X_JOB_NOT_FOUND, JobsError
from ultimate_jobs.ops import routes
from ultimate_jobs.ops.rows import id_prefix_range, jobs

SHOWN = 10
SCAN = 100_000  # ids read for one short form; a busier minute asks for more characters
_SHORT = re.compile(r"^([0-9a-f-]{1,36})(?:\u2026|\.\.\.)([0-9a-f-]{1,32})\Z")  # \Z: $ passes a trailing \n
_WHOLE = re.compile(r"^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}\Z")


def short_form(job_id: str) -> str:
    """``01a23171…3bc2``: what the admin and the CLI show for a job id."""
    text = str(job_id)
    return f"{text[:8]}\u2026{text[-4:]}"


@routes.each_database(routes.concatenated)
def matching_job_ids(text: str, *, limit: int = SHOWN + 1) -> list[str]:
    """Ids of the jobs ``text`` names (a whole id, a prefix or a short form), oldest first."""
    typed = text.strip().lower()
    short = _SHORT.match(typed)
    head, tail = (short.group(1), short.group(2).replace("-", "")) if short else (typed, "")
    low, high = id_prefix_range(head)  # X_ID_INVALID for anything but hex and dashes
    found = jobs().filter(id__gte=low, id__lte=high).order_by("id").values_list("id", flat=True)
    if not tail:
        return [str(i) for i in found[:limit]]
    hits: list[str] = []
    for job_id in found[:SCAN]:
        if job_id.hex.endswith(tail):
            hits.append(str(job_id))
            if len(hits) >= limit:
                break
    return hits


@routes.first_found
def resolve_job_id(text: str) -> str:
    """The one job id ``text`` names; raise ``X_JOB_NOT_FOUND`` or ``X_ID_AMBIGUOUS`` otherwise."""
    if not isinstance(text, str) or not text.strip():
        raise JobsError(X_ID_INVALID, f"{text!r} is not a job id.")
    if _WHOLE.match(text.strip().lower()):
        return str(id_prefix_range(text)[0])  # a whole id as it is (a staged one has no row yet)
    hits = matching_job_ids(text)
    if not hits:
        raise JobsError(X_JOB_NOT_FOUND, f"No job has an id matching {text!r}.")
    if len(hits) > 1:
        listed = ", ".join(hits[:SHOWN]) + (" ..." if len(hits) > SHOWN else "")
        raise JobsError(X_ID_AMBIGUOUS, f"{text!r} matches {'more than ' if len(hits) > SHOWN else ''}"
                        f"{min(len(hits), SHOWN)} jobs: {listed}.")
    return hits[0]
