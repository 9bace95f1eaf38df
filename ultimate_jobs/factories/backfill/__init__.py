"""``backfill()``: a data migration as a paced, resumable job.

``declaration`` validates ``backfill(...)`` and declares its job; ``sweep`` is the pass that job
runs (keyset pages by pk, one durable step a page, each handed to ``handle`` as a
``BackfillBatch``); ``ledger`` is the ``BackfillRun`` row a pass keeps; ``status`` answers what
is declared against what was swept, for ``ops`` and ``jobs_backfill``. Imports point one way:
``status`` -> ``declaration`` -> ``sweep`` -> ``ledger``.
"""
