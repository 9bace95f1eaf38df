"""Drain variants, interleaved: which knob moves the drain?

Ad hoc, run by hand (see bench/RESULTS.md); not part of make bench. Monkeypatches internals, so it
tracks the code it was written against (b6b67e6).
"""

# ruff: noqa: E402  (Django is set up before the app's modules are imported)

import os
import statistics
import sys

import _boot  # sets up Django on a throwaway bench database; see _boot.py

from bench import measure

VARIANTS = {
    "baseline c=10": ({}, 10),
    "prepared statements (prepare_threshold=0) c=10": ({"BENCH_PG_PREPARE_THRESHOLD": "0"}, 10),
    "c=50": ({}, 50),
    "venv without opentelemetry c=10": (
        {"PY": os.environ.get("NO_OTEL_PYTHON", "/tmp/pb/perf-venv-ultimate_jobs/bin/python")},
        10,
    ),
    "synchronous_commit=off c=10": ({"PGOPTIONS": "-c synchronous_commit=off"}, 10),
}
_boot.workers_use_env_python()
procs = int(sys.argv[1]) if len(sys.argv) > 1 else 2
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
res = {k: [] for k in VARIANTS}
try:
    for r in range(rounds):
        for name, (env, conc) in VARIANTS.items():
            measure.recreate_database()
            saved = {k: os.environ.get(k) for k in env}
            os.environ.update(env)
            try:
                out = measure.measure_drain(procs, n=10000, concurrency=conc)
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
            res[name].append(
                (out[f"drain_{procs}p_jobs_per_s"], out.get(f"drain_{procs}p_steady_jobs_per_s", 0))
            )
            print(r, name, [round(x) for x in res[name][-1]], os.getloadavg()[0], flush=True)
finally:
    measure.drop_database()
base = statistics.median(v[1] for v in res["baseline c=10"])
for name, v in res.items():
    tot = statistics.median(x[0] for x in v)
    st = statistics.median(x[1] for x in v)
    print(f"{name:32} total {tot:7.0f}  steady {st:7.0f}  steady/baseline {st / base:.2f}x")
