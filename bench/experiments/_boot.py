"""Imported first by every experiment: point at the code to measure, then set up Django.

``CODE`` names a ``bench/run.py --snapshot`` directory to measure instead of the working tree;
each run gets its own throwaway database ``bench_uj_exp_<pid>``.
"""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if os.environ.get("CODE"):  # a bench/run.py --snapshot directory, else the working tree
    sys.path.insert(0, os.environ["CODE"])
    os.environ["PYTHONPATH"] = os.environ["CODE"]
sys.path.append(str(ROOT))
os.environ["BENCH_UJ_DB"] = f"bench_uj_exp_{os.getpid()}"
os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
import django  # noqa: E402 - after the settings module is chosen

django.setup()


def workers_use_env_python() -> None:
    """Start the measured workers with ``$PY`` when a variant sets it (another venv), per case."""
    from bench import measure

    default = measure.worker_argv

    def worker_argv(concurrency):
        argv = default(concurrency)
        if os.environ.get("PY"):
            argv[0] = os.environ["PY"]
        return argv

    measure.worker_argv = worker_argv
