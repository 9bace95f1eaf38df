"""What redaction costs on one unbroken word, per surface (issue 25: 20,000 characters took 55 s).

Run by hand, once per tree, on the same machine in the same sitting::

    PYTHONPATH=$PWD .venv/bin/python bench/experiments/redaction_cost.py         # this tree
    PYTHONPATH=/work/main .venv/bin/python bench/experiments/redaction_cost.py   # another checkout (before)

Each case (shape x size x surface) runs in its own process, cut after ``TIMEOUT`` seconds (60) and
reported as ``> 60 s``; once a size is cut, the larger sizes of that shape and surface are not run
(reported ``> 60 s (not run)``), so a quadratic tree does not run for hours. Shapes: ``hex``,
``base64url`` (``-`` and ``_`` inside), ``jwt`` (three base64url segments joined by ``.``); sizes
``SIZES`` (``10K,100K,1M``, KiB and MiB). Surfaces: ``redact_text`` (errors, spans, the admin's
error column), ``format_error`` (the traceback a failed attempt stores at settle), ``redact`` (a
payload value as ``ops.get_job`` answers it), ``preview_json`` (the admin's payload column) and
``log`` (the ``ultimate_jobs`` logger's filter). Needs no database.

Measured 2026-12-03, one sitting, 2 shared cores (TIMEOUT=30 before, every surface):

    one-word string   before (main c5ca8e2)                  after (issue 25)
    10 KiB            3.8-26.5 s, or > 30 s (hex log/...)     0.003-0.005 s
    100 KiB           > 30 s on every shape and surface       0.005-0.011 s
    1 MiB             not run (100 KiB already > 30 s)        0.019-0.061 s
"""

# ruff: noqa: E402  (Django is set up before the app's modules are imported)

from __future__ import annotations

import base64
import json
import logging
import os
import random
import subprocess
import sys
import time

SHAPES = ("hex", "base64url", "jwt")
SURFACES = ("redact_text", "format_error", "redact", "preview_json", "log")
TIMEOUT = float(os.environ.get("TIMEOUT", "60"))
SIZES = os.environ.get("SIZES", "10K,100K,1M").split(",")


def size_of(label: str) -> int:
    return int(label[:-1]) * {"K": 1024, "M": 1024 * 1024}[label[-1]]


def word(shape: str, n: int) -> str:
    rng = random.Random(25)
    raw = rng.randbytes(n)
    if shape == "hex":
        return raw.hex()[:n]
    b64 = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    if shape == "base64url":
        return b64[:n]
    third = n // 3
    return "eyJ" + b64[: third - 4] + "." + b64[third: 2 * third - 1] + "." + b64[2 * third: n]


def run_case(shape: str, n: int, surface: str) -> float:
    import _boot  # noqa: F401  (Django set up; no database is touched)

    from ultimate_jobs.redact import RedactingFilter, preview_json, redact, redact_text
    from ultimate_jobs.runtime.failures import format_error

    text = word(shape, n)
    assert len(text) == n, (shape, n, len(text))
    if surface == "format_error":
        try:
            raise ValueError(text)
        except ValueError as exc:
            error = exc
    start = time.perf_counter()
    if surface == "redact_text":
        redact_text(text)
    elif surface == "format_error":
        format_error(error)
    elif surface == "redact":
        redact({"blob": text})
    elif surface == "preview_json":
        preview_json(json.dumps({"blob": text}), limit=300)
    else:
        RedactingFilter().filter(logging.LogRecord("ultimate_jobs", logging.ERROR, __file__, 1, "jobs.x %s",
                                                   (text,), None))
    return time.perf_counter() - start


def main() -> None:
    code = os.environ.get("PYTHONPATH", "(sys.path)")
    print(f"# redaction cost, code from {code}, timeout {TIMEOUT:g} s per case")
    print(f"{'shape':<10} {'surface':<13} " + " ".join(f"{s:>16}" for s in SIZES))
    for shape in SHAPES:
        for surface in SURFACES:
            cells: list[str] = []
            cut = False
            for label in SIZES:
                if cut:
                    cells.append(f"> {TIMEOUT:g} s (not run)")
                    continue
                argv = [sys.executable, __file__, "--case", shape, str(size_of(label)), surface]
                try:
                    done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, check=True)
                except subprocess.TimeoutExpired:
                    cells.append(f"> {TIMEOUT:g} s")
                    cut = True
                    continue
                cells.append(f"{float(done.stdout.strip().splitlines()[-1]):.4f} s")
            print(f"{shape:<10} {surface:<13} " + " ".join(f"{c:>16}" for c in cells), flush=True)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    if sys.argv[1:2] == ["--case"]:
        print(run_case(sys.argv[2], int(sys.argv[3]), sys.argv[4]))
    else:
        main()
