"""Idle pickup latency variants, interleaved.

Ad hoc, run by hand (see bench/RESULTS.md); not part of make bench. Monkeypatches internals, so it
tracks the code it was written against (b6b67e6).
"""

# ruff: noqa: E402  (Django is set up before the app's modules are imported)

import os
import statistics
import sys

import _boot  # sets up Django on a throwaway bench database; see _boot.py

from bench import measure
from ultimate_jobs import enqueue as enq

VARIANTS = {
    "baseline": {},
    "venv without opentelemetry": {
        "PY": os.environ.get("NO_OTEL_PYTHON", "/tmp/pb/perf-venv-ultimate_jobs/bin/python")
    },
    "enqueue wake not throttled (WAKE_EVERY=0)": {"WAKE": "0"},
    "worker with synchronous_commit=off": {"PGOPTIONS": "-c synchronous_commit=off"},
    "worker with prepared statements": {"BENCH_PG_PREPARE_THRESHOLD": "0"},
}
_boot.workers_use_env_python()
res = {k: [] for k in VARIANTS}
default_wake = enq.WAKE_EVERY
try:
    for r in range(int(sys.argv[1]) if len(sys.argv) > 1 else 3):
        for name, env in VARIANTS.items():
            measure.recreate_database()
            saved = {k: os.environ.get(k) for k in env}
            os.environ.update({k: v for k, v in env.items() if k != "WAKE"})
            enq.WAKE_EVERY = float(env.get("WAKE", default_wake))
            try:
                out = measure.measure_latency(samples=50)
            finally:
                enq.WAKE_EVERY = default_wake
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
            res[name].append((out["latency_median_ms"], out["latency_p95_ms"]))
            print(
                r,
                f"{name:45} median {out['latency_median_ms']:7.2f}  p95 {out['latency_p95_ms']:7.2f}  "
                f"load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
finally:
    measure.drop_database()
for name, v in res.items():
    print(
        f"{name:45} median of medians {statistics.median(x[0] for x in v):7.2f} ms   "
        f"median of p95s {statistics.median(x[1] for x in v):7.2f} ms"
    )
