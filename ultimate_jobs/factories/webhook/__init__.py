"""Outbound webhooks: ``webhook()`` and its ledger; ``verify_webhook_signature`` for receivers.

``declaration`` validates ``webhook(...)`` and holds the delivery body; ``signing`` is the
signature format both halves share; ``addresses`` pins a URL to one checked address (the SSRF
guard); ``transport`` is the one httpx POST; ``ledger`` is the ``ModelLedger`` and the retention
target of its rows. ``ultimate_jobs.webhooks`` re-exports the public names. Imports point one way:
``declaration`` -> ``transport`` -> ``addresses``; ``declaration`` -> ``signing``, ``ledger``.
"""
