"""Internal: the external effects a test counts (``record_effect``), which ``crash_proof`` compares.

Re-exported by ``ultimate_jobs.testing``.
"""

from __future__ import annotations

import threading
from collections import Counter

_effects: Counter[str] = Counter()
_effects_lock = threading.Lock()


def record_effect(name: str, count: int = 1) -> None:
    """Count an external effect (an email sent, a charge made) so ``crash_proof`` can see it
    happen twice. Cheap and harmless outside tests; call it where the effect happens."""
    with _effects_lock:
        _effects[name] += count


def recorded_effects() -> Counter[str]:
    """A copy of the effects counted so far in this process."""
    with _effects_lock:
        return Counter(_effects)
