"""Scheduled tasks: cron declarations and the scheduler that fires them.

``declarations`` holds ``task()`` and the registry of ``TaskHandle`` values; ``cron`` turns a cron
expression and a time zone into occurrences (pure, no I/O); ``watermarks`` records each task's last
fired occurrence; ``leader`` holds the leader lease, so one scheduler in the fleet fires; and
``scheduler`` is the loop ``jobs_scheduler`` runs: each pass, the leader enqueues every occurrence
past its watermark in the same transaction that moves the watermark.
"""
