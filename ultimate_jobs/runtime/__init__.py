"""The runtime: what ``jobs_worker`` runs — claiming jobs, running their bodies, settling them.

``worker`` puts the worker together from its parts: ``claims`` (the claim loop), ``settling`` (the
one owner of settle statements: batching, the error path, timeouts), ``heartbeat`` (lease renewal
and rescue), ``drain``, over the attempts it holds (``holdings``) and its ``threads``. ``execute``
runs one attempt (tenant context via ``tenancy``, deadline, body, error mapping, stored errors via
``failures``) and answers its ``outcome`` (the settlement, and what runs once it landed:
``on_settled``, an event wait's re-check), and ``execute_async`` the same for an ``async def`` body;
``steps`` and ``compensation`` are the durable-run engine behind ``ctx.step`` (``async_steps`` its
awaited front, ``aio`` what runs off the event loop); ``progress`` writes progress reports;
``deadlines`` bounds an attempt; ``slots`` takes fleet-wide concurrency slots and ``limits`` the
per-process ones; ``presence`` is the worker's heartbeat row (``housekeeping`` its hourly counter
pruning); ``roles`` runs the relay and the scheduler beside a worker (``jobs_worker --roles``);
``routed`` runs one claim loop per database (``QUEUE_DATABASES``). Nothing here is imported by the
core modules above it (declaration, enqueue): the runtime reads jobs through ``ultimate_jobs.db``.
"""
