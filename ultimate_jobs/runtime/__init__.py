"""The runtime: what ``jobs_worker`` runs — claiming jobs, running their bodies, settling them.

``worker`` holds the claim loop and its parts (the lease keeper, the drain); ``execute`` runs one
attempt (tenant context, deadline, body, error mapping) and ``settled`` builds its settlement;
``steps`` and ``compensation`` are the durable-run engine behind ``ctx.step``; ``progress`` writes
progress reports; ``deadlines`` bounds an attempt; ``slots`` takes fleet-wide concurrency slots and
``limits`` the per-process ones; ``presence`` is the worker's heartbeat row; ``roles`` runs the
relay and the scheduler beside a worker (``jobs_worker --roles``). Nothing here is imported by the
core modules above it (declaration, enqueue): the runtime reads jobs through ``ultimate_jobs.db``.
"""
