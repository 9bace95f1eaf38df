"""Internal: ``jobs top`` — the overview as a live table in a terminal, redrawn every interval.

Plain text only (no ``rich``, no curses): it runs wherever ``manage.py`` does, including a plain
``pip install ultimate-jobs``, over SSH and in ``kubectl exec``. On a terminal each frame clears
the screen first; piped, frames follow one another (``--iterations 1`` prints one and exits).
Ctrl-C ends it with exit code 0. Every number comes from ``ops.overview()``, the same call the
admin's overview page and ``jobs stats --json`` read. Text from the database passes ``clean()``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import IO

from ultimate_jobs import ops
from ultimate_jobs.management.render import clean
from ultimate_jobs.ops.when import relative_text, utc_text

CLEAR = "\x1b[H\x1b[2J"
RECENT = 5  # minutes the "last 5 min" columns add up


def _grid(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """Left-aligned text columns, two spaces apart (numbers right-aligned)."""
    cells = [[clean(str(c), cell=True) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    numeric = [all(r[i].replace(".", "", 1).isdigit() for r in cells) and bool(cells) for i in range(len(headers))]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric, strict=True))

    return [line(headers).rstrip(), *(line(r).rstrip() for r in cells)]


def frame(view: ops.Overview) -> str:
    """One screenful: queues, workers, tasks due next, the last day's dead jobs."""
    lines = [f"jobs top  {utc_text(view['at'])}  (Ctrl-C to quit)", ""]
    queues = [(q["queue"], q["depth"], "-" if q["oldest_ready_age"] is None else f"{q['oldest_ready_age']:.1f}s",
               q["running"], q["delayed"], sum(q["hour"]["done"][-RECENT:]), sum(q["hour"]["failed"][-RECENT:]),
               sum(q["hour"]["done"]), sum(q["hour"]["failed"]), "paused" if q["paused"] else "")
              for q in view["queues"]]
    lines += _grid(("QUEUE", "DEPTH", "OLDEST", "RUNNING", "DELAYED", "DONE 5m", "FAILED 5m", "DONE 1h", "FAILED 1h",
                    ""), queues) if queues else ["no queues"]
    lines += ["", f"WORKERS ({len(view['workers'])} alive)"]
    workers = [(w["id"], ",".join(w["queues"]), f"{w['in_flight_count']}/{w['slots']}",
                relative_text(w["last_heartbeat_at"])) for w in view["workers"]]
    lines += _grid(("ID", "QUEUES", "IN FLIGHT", "HEARTBEAT"), workers) if workers else ["no live workers"]
    if view["tasks_due"]:
        lines += ["", "SCHEDULED TASKS DUE NEXT"]
        lines += _grid(("TASK", "NEXT RUN"), [(t["task"], relative_text(t["next_run"])) for t in view["tasks_due"][:5]])
    lines += ["", f"DEAD IN THE LAST 24 H: {view['dead_last_day_count']}"]
    lines += _grid(("ID", "JOB", "DIED"), [(ops.short_form(d["id"]), d["name"], relative_text(d["finished_at"]))
                                          for d in view["dead_last_day"][:5]]) if view["dead_last_day"] else []
    return "\n".join(lines) + "\n"


class Top:
    """``Top(stream, interval=2.0, iterations=None).run()``: redraw until Ctrl-C or ``iterations``."""

    def __init__(self, stream: IO[str], *, interval: float = 2.0, iterations: int | None = None) -> None:
        self.stream, self.interval, self.iterations = stream, max(0.2, interval), iterations
        self.clear = stream.isatty()

    def run(self) -> int:
        shown = 0
        try:
            while self.iterations is None or shown < self.iterations:
                if shown:
                    time.sleep(self.interval)
                text = frame(ops.overview())
                self.stream.write((CLEAR if self.clear else ("\n" if shown else "")) + text)
                self.stream.flush()
                shown += 1
        except KeyboardInterrupt:
            self.stream.write("\n")
        return 0
