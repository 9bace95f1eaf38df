"""The peer harness (``/work/shared/peer-bench``), run in place, and its records read back as our metrics.

The harness is a measuring tool owned elsewhere: it is invoked, never copied. Each call runs one
interleaved round of every peer case (``run_all.py --rounds 1``) in that peer's own venv
(``BENCH_VENV_ROOT``/``perf-venv-<tool>``) and appends JSON lines to a file of ours.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

DEFAULT_DIR = Path(os.environ.get("BENCH_PEER_DIR", "/work/shared/peer-bench"))
PEERS = ("procrastinate", "pgqueuer", "chancy", "oban", "djtasks", "dbos", "celery_redis", "celery_rabbitmq")
VENVS = {"celery_redis": "celery", "celery_rabbitmq": "celery"}  # the two Celery columns share perf-venv-celery
OURS = "ultimate_jobs"  # the harness's own adapter for this project, when asked for


def venv_root() -> str:
    return os.environ.get("BENCH_VENV_ROOT", os.environ.get("TMPDIR", "/tmp"))


def available(tools: Iterable[str]) -> list[str]:
    """The tools whose venv exists (the harness would fail every case of the others)."""
    return [
        t
        for t in tools
        if os.path.isdir(os.environ.get(f"BENCH_VENV_{t.upper()}", f"{venv_root()}/perf-venv-{VENVS.get(t, t)}"))
    ]


def run_round(
    peer_dir: Path,
    tools: list[str],
    metrics: Iterable[str],
    out: Path,
    rnd: int = 1,
    env: dict[str, str] | None = None,
) -> None:
    """Round ``rnd`` of every case of ``tools`` for ``metrics``; raw records are appended to ``out``.

    The tool order rotates with ``rnd`` (as ``run_all.py`` does across its own rounds), so no tool
    always runs first after a quiet period. ``env`` carries ``PYTHONPATH`` when a snapshot of
    ultimate_jobs is measured (the harness's own ``ultimate_jobs`` column imports it from there).
    """
    shift = (rnd - 1) % max(1, len(tools))
    tools = tools[shift:] + tools[:shift]
    cmd = [
        sys.executable,
        str(peer_dir / "run_all.py"),
        "--rounds",
        "1",
        "--tools",
        ",".join(tools),
        "--metrics",
        ",".join(metrics),
        "--out",
        str(out),
    ]
    subprocess.run(cmd, cwd=peer_dir, env=env, check=True)


def case_label(rec: dict[str, Any]) -> str:
    """The tool plus its non-default options, as the harness's summary names a case."""
    parts = [f"{k}={v}" for k, v in sorted((rec.get("opts") or {}).items())]
    gap = rec.get("gap_s") or [0.1, 0.5]
    if rec.get("metric") == "latency" and gap != [0.1, 0.5]:
        parts.append(f"gap={gap[0]}-{gap[1]}s")
    return rec["tool"] + (f" [{','.join(parts)}]" if parts else "")


def as_metrics(rec: dict[str, Any]) -> dict[str, float]:
    """One harness record in this benchmark's metric keys (see ``bench/run.py``)."""
    if "error" in rec:
        return {}
    metric = rec["metric"]
    if metric == "single":
        return {"single_jobs_per_s": rec["jobs_per_s"]}
    if metric == "bulk":
        return {"bulk_1k_ms": rec["seconds_1000"] * 1000, "bulk_10k_jobs_per_s": rec["jobs_per_s_10000"]}
    if metric == "drain":
        key = f"drain_{rec['procs']}p"
        out = {
            f"{key}_jobs_per_s": rec["jobs_per_s"],
            f"rss_{rec['procs']}p_mib": max(rec["peak_rss_mib_per_worker"]),
        }
        if "steady_jobs_per_s" in rec:
            out[f"{key}_steady_jobs_per_s"] = rec["steady_jobs_per_s"]
        return out
    if metric == "latency" and rec.get("median_ms") is not None:
        return {"latency_median_ms": rec["median_ms"], "latency_p95_ms": rec["p95_ms"]}
    return {}


def load(paths: Iterable[Path]) -> list[dict[str, Any]]:
    records = []
    for path in paths:
        with open(path) as f:
            records += [json.loads(line) for line in f if line.strip()]
    return [r for r in records if r.get("tool") not in (None, "pgbench")]


def medians(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, list[float]]]:
    """``{metric key: {case label: [value per round]}}``."""
    out: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for rec in records:
        for key, value in as_metrics(rec).items():
            out[key][case_label(rec)].append(value)
    return out


def best(
    values: dict[str, list[float]], higher_is_better: bool, exclude: str = OURS
) -> tuple[str, float] | None:
    """The best case by its median over rounds, leaving out ``exclude`` (our own adapter's column)."""
    meds = {case: statistics.median(v) for case, v in values.items() if v and not case.startswith(exclude)}
    if not meds:
        return None
    pick = (max if higher_is_better else min)(meds, key=lambda c: meds[c])
    return pick, meds[pick]
