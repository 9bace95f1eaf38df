"""Peak memory of ONE import page of tiny records (issue 25): a 1 MiB page of newlines, and a
1 MiB page of one-byte records, read and handed over by the import's own page code.

Ad hoc, run by hand; no database (the page's ``handle`` counts rows, nothing is refused, so no
report is written). Each case runs in a fresh child process so ``ru_maxrss`` is the case's own;
``tracemalloc`` gives the Python-allocation peak of the page alone.

Usage (after / before a change)::

    PYTHONPATH=$PWD        .venv/bin/python bench/experiments/import_newlines_memory.py
    PYTHONPATH=/work/main  .venv/bin/python bench/experiments/import_newlines_memory.py
"""

import json
import resource
import subprocess
import sys
import tempfile
import tracemalloc
from pathlib import Path

MiB = 1024 * 1024
CASES = {
    "newlines": b"\n" * MiB,                         # blank lines only
    "one-byte records": b"x\n" * (MiB // 2),         # 524,288 one-column CSV rows
}


def child(case: str) -> None:
    import django
    from django.conf import settings

    settings.configure(INSTALLED_APPS=[], USE_TZ=True)
    django.setup()
    from django.core.files.storage import FileSystemStorage

    from ultimate_jobs.factories.import_rows.declaration import Import
    from ultimate_jobs.factories.import_rows.page import run_page

    folder = tempfile.mkdtemp()
    Path(folder, "page.csv").write_bytes(CASES[case])
    disk = FileSystemStorage(location=folder)
    seen = [0]

    def handle(batch):
        seen[0] += len(batch.rows)

    imp = Import(name="bench.newlines", storage=lambda: disk, errors_storage=lambda: disk, columns=("x",),
                 handle_batch=handle, format="csv", form=None, batch=500, page_bytes=MiB,
                 max_record_bytes=64 * 1024, max_row_errors=1000)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    out = run_page(imp, None, {}, key="page.csv", index=0, offset=0, line=1, header=["x"], refused_before=0,
                   error_prefix="errors")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"case": case, "rows": seen[0], "offset": out["offset"], "tracemalloc_peak_mib": peak / MiB,
                      "maxrss_growth_mib": (rss - base) / 1024}))


def main() -> None:
    for case in CASES:
        subprocess.run([sys.executable, __file__, case], check=True)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        child(sys.argv[1])
    else:
        main()
