"""Factories over ``@job``: the jobs every app ends up writing by hand, with their rules built in.

Each factory declares an ordinary job (a ``JobHandle``: enqueue, ``using``, retries, the admin,
the CLI, ``ops.get_job``) whose body is written here. ``backfill`` sweeps a QuerySet in keyset
pages, one durable step a page, with a ledger (``backfill/``); ``purge`` deletes in bounded batches
(``purge``), and ``retention`` is the built-in purge of finished jobs and old events; ``pacer``
spaces out pages at a rate. ``webhook/`` delivers one signed event to one endpoint (the SSRF
guard, the ``ModelLedger``), ``webhook_receiver`` is the inbound view and its job, ``consumer``
reads a stream per key with a supervising task. ``export_rows`` writes a QuerySet to a Django
``Storage`` one object per page, ``import_rows/`` reads a file back a page of bytes per step,
``rollup`` recomputes the recent buckets of a time series in one upsert, ``refresh_view`` refreshes
a PostgreSQL materialized view, and ``subject/`` is one person's data (the reach from model
metadata, the erase, the export). ``kit`` is the setup they share: the body declared as a job in
the caller's module, and the checks of the options most of them take.
"""
