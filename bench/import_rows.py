"""``import_rows()`` over a large CSV: the process's peak RSS growth and rows per second.

Usage::

    .venv/bin/python bench/import_rows.py                    # a 200 MB CSV generated into /tmp, SQLite jobs db
    .venv/bin/python bench/import_rows.py --mb 20 --page-bytes 262144
    .venv/bin/python bench/import_rows.py --database postgres   # jobs tables on 127.0.0.1:5432 (bench_uj_import)

Not part of ``make test``: run it by hand. The CSV (``sku,name,price,stock``; every tenth name
quoted with an embedded newline and a multi-byte character) is written to a temporary folder
under ``/tmp`` a line at a time and deleted at the end; it is never committed. The import runs
in this process through the real execution path (``ultimate_jobs.testing.run_job``: one durable
step a page, each checkpoint written to the jobs database), with a Django ``Form`` coercing every
row and a ``handle`` that only counts, so the figure is the import's own cost, not a table's.

Measured: ``ru_maxrss`` just before the run and after it (the growth is what the import added to
the process's peak), rows/s and MB/s over the run, pages (steps), and that every row arrived.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import django
from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def configure(database: str, folder: str) -> None:
    if database == "postgres":
        db = {"ENGINE": "django.db.backends.postgresql", "HOST": "127.0.0.1", "PORT": 5432, "USER": "postgres",
              "NAME": "bench_uj_import"}
    else:
        db = {"ENGINE": "django.db.backends.sqlite3", "NAME": f"{folder}/jobs.sqlite3"}
    settings.configure(INSTALLED_APPS=["ultimate_jobs"], DATABASES={"default": db}, USE_TZ=True,
                       DEFAULT_AUTO_FIELD="django.db.models.BigAutoField")
    django.setup()


def write_csv(path: Path, megabytes: int) -> int:
    """Write rows until the file holds ``megabytes`` MB; answer the row count."""
    target = megabytes * 1_000_000
    rows = 0
    with path.open("wb") as out:
        out.write(b"sku,name,price,stock\r\n")
        size = 0
        while size < target:
            chunk = []
            for i in range(rows, rows + 10_000):
                name = f'"Product {i}, ""deluxe""\nsecond line €"' if i % 10 == 0 else f"Product number {i}"
                chunk.append(f"SKU-{i:09d},{name},{i % 1000}.{i % 100:02d},{i % 500}\r\n")
            data = "".join(chunk).encode()
            out.write(data)
            size += len(data)
            rows += 10_000
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--page-bytes", type=int, default=1024 * 1024)
    parser.add_argument("--database", choices=["sqlite", "postgres"], default="sqlite")
    args = parser.parse_args()

    folder = tempfile.mkdtemp(prefix="uj-bench-import-", dir="/tmp")
    try:
        if args.database == "postgres":
            import psycopg
            with psycopg.connect("host=127.0.0.1 user=postgres dbname=postgres", autocommit=True) as conn:
                conn.execute("DROP DATABASE IF EXISTS bench_uj_import")
                conn.execute("CREATE DATABASE bench_uj_import")
        configure(args.database, folder)
        run(args, Path(folder))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run(args: argparse.Namespace, folder: Path) -> None:
    from django import forms
    from django.core.files.storage import FileSystemStorage
    from django.core.management import call_command

    from ultimate_jobs import NO_TENANT, import_rows
    from ultimate_jobs.testing import run_job

    call_command("migrate", verbosity=0)
    began = time.perf_counter()
    expected = write_csv(folder / "big.csv", args.mb)
    size = (folder / "big.csv").stat().st_size
    print(f"generated {size / 1e6:.1f} MB, {expected:,} rows in {time.perf_counter() - began:.1f}s")

    class Row(forms.Form):
        sku = forms.CharField(max_length=50)
        name = forms.CharField(max_length=200)
        price = forms.DecimalField(max_digits=12, decimal_places=2)
        stock = forms.IntegerField()

    counted = [0]

    def handle(batch):
        counted[0] += len(batch.rows)

    handle_job = import_rows(name="bench.import", tenant=NO_TENANT, storage=lambda: FileSystemStorage(folder),
                             key="big.csv", columns=["sku", "name", "price", "stock"], form=Row, handle=handle,
                             page_bytes=args.page_bytes)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    began = time.perf_counter()
    trace = run_job(handle_job)
    took = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = trace.result
    assert trace.state == "done", trace.last_error
    assert result["rows"] == counted[0] == expected and result["refused"] == 0 and result["bytes"] == size
    growth = (after - before) / 1024
    print(f"database={args.database} page_bytes={args.page_bytes:,} pages={result['pages']} rows={result['rows']:,}")
    print(f"took {took:.1f}s: {result['rows'] / took:,.0f} rows/s, {size / 1e6 / took:.1f} MB/s")
    print(f"peak RSS {before / 1024:.1f} MiB before, {after / 1024:.1f} MiB after: growth {growth:.1f} MiB "
          f"({'under' if growth < 64 else 'OVER'} 64 MiB)")
    print(f"python {sys.version.split()[0]}, pid {os.getpid()}")


if __name__ == "__main__":
    main()
