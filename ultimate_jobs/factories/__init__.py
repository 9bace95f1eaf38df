"""Factories over ``@job``: the jobs every app ends up writing by hand, with their rules built in.

Each factory declares an ordinary job (a ``JobHandle``: enqueue, ``using``, retries, the admin,
the CLI, ``ops.get_job``) whose body is written here. ``backfill`` sweeps a QuerySet in keyset
pages, one durable step a page, with a ledger (``backfill/``); ``purge`` deletes in bounded batches
(``purge``), and ``retention`` is the built-in purge of finished jobs and old events; ``pacer``
spaces out pages at a rate. ``webhook/`` delivers one signed event to one endpoint (the SSRF
guard, the ``ModelLedger``), ``webhook_receiver`` is the inbound view and its job, ``consumer``
reads a stream per key with a supervising task. Future factories (imports and exports, rollups,
one person's data) land here too, one module or subpackage each.
"""
