"""The runtime: what ``jobs_worker`` runs — claiming jobs, running their bodies, settling them.

``worker`` puts the worker together from its parts: ``claims`` (the claim loop), ``settling``
(settle batching, timeouts), ``leases`` (the lease keeper), ``drain``, over the runs it holds
(``runs``) and its ``threads``. ``execute`` runs one attempt (tenant context via ``tenancy``,
deadline, body, error mapping, stored errors via ``failures``) and ``settled`` builds its
settlement; ``steps`` and ``compensation`` are the durable-run engine behind ``ctx.step``;
``progress`` writes progress reports; ``deadlines`` bounds an attempt; ``slots`` takes fleet-wide
concurrency slots and ``limits`` the per-process ones; ``presence`` is the worker's heartbeat row
(``housekeeping`` its hourly counter pruning); ``roles`` runs the relay and the scheduler beside a
worker (``jobs_worker --roles``); ``routed`` runs one claim loop per database (``QUEUE_DATABASES``).
Nothing here is imported by the core modules above it
(declaration, enqueue): the runtime reads jobs through ``ultimate_jobs.db``.
"""
