"""Index entries a fresh job writes: counted in each index of the job table after N fresh enqueues.

Run by hand (not part of make bench), against the working tree or a snapshot::

    .venv/bin/python bench/experiments/index_entries.py                  # the tree
    .venv/bin/python bench/run.py --snapshot 5e0611c --rounds 0 --metrics single   # extracts /tmp/bench-uj-5e0611c
    CODE=/tmp/bench-uj-5e0611c .venv/bin/python bench/experiments/index_entries.py  # before 0013_write_path

It enqueues N fresh jobs (``enqueue_many`` of the bench's no-op: new keys, no run id given), then for
every index of ``ultimate_jobs_job`` counts its entries twice: from the catalog (the rows its predicate
admits) and from the index pages themselves (``pageinspect``: every leaf item, a deduplicated posting
list counted as the heap pointers it holds, high keys left out). Entries per fresh job = sum / N.
"""

# ruff: noqa: E402  (Django is set up before the app's modules are imported)

import os

import _boot  # noqa: F401  (sets up Django on a throwaway bench database; see _boot.py)

from bench import measure

N = int(os.environ.get("N", "1000"))

measure.recreate_database()
from django.db import connection

from bench.jobs import noop

noop.enqueue_many([{"i": -1, "seq": s} for s in range(N)])
PAGE_ITEMS = """
SELECT coalesce(sum(CASE WHEN i.tids IS NULL THEN 1 ELSE array_length(i.tids, 1) END), 0)
  FROM generate_series(1, (pg_relation_size(%(index)s::regclass) / current_setting('block_size')::int) - 1) AS b,
       LATERAL bt_page_stats(%(index)s, b::int) AS s,
       LATERAL bt_page_items(%(index)s, b::int) AS i
 WHERE s.type = 'l' AND NOT (s.btpo_next <> 0 AND i.itemoffset = 1)
"""
with connection.cursor() as c:
    c.execute("CREATE EXTENSION IF NOT EXISTS pageinspect")
    c.execute("""SELECT ic.relname, pg_get_expr(x.indpred, x.indrelid), pg_get_indexdef(x.indexrelid)
                   FROM pg_index AS x JOIN pg_class AS ic ON ic.oid = x.indexrelid
                  WHERE x.indrelid = 'ultimate_jobs_job'::regclass ORDER BY ic.relname""")
    indexes = c.fetchall()
    total_catalog = total_pages = 0
    print(f"{N} fresh jobs enqueued; entries per index (catalog / pages):")
    for name, pred, definition in indexes:
        c.execute(f"SELECT count(*) FROM ultimate_jobs_job WHERE {pred or 'true'}")
        catalog = c.fetchone()[0]
        c.execute(PAGE_ITEMS, {"index": name})
        pages = int(c.fetchone()[0])
        total_catalog += catalog
        total_pages += pages
        print(f"  {name:32} {catalog:6} / {pages:6}   {definition.split(' USING ')[1]}")
    print(f"entries per fresh job: {total_catalog / N:.2f} (catalog) / {total_pages / N:.2f} (pages), "
          f"{len(indexes)} indexes on the table")
measure.drop_database()
