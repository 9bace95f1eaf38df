"""``python manage.py demo``: migrate, enqueue the shop's jobs, run a real worker, show the outcome.

The worker is a separate process (``manage.py jobs_worker --burst``), exactly as in production,
and the table is read back through ``ultimate_jobs.ops.get_job``, the operator API the admin
and the CLI use. Exits non-zero when a job did not end the way the demo expects.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import OperationalError, connections

EXPECTED = {
    "shop.send_receipt": ("done", 1),
    "shop.charge_card": ("done", 3),
    "shop.sync_inventory": ("dead", 3),
    "shop.fetch_exchange_rate": ("done", 1),
}


class Command(BaseCommand):
    help = "Run the ultimate_jobs demo: migrate, enqueue demo jobs, run jobs_worker --burst, print a table."

    def handle(self, *args: Any, **options: Any) -> None:
        from rich.console import Console

        # A pipe (make, CI) reports no width: give the table room instead of rich's 80 columns.
        console = Console(width=None if sys.stdout.isatty() else 120)
        db = connections["default"]
        console.print(f"[bold]ultimate_jobs demo[/bold] on {db.vendor} ({db.settings_dict['NAME']})")

        console.print("1. migrate")
        try:
            db.ensure_connection()
        except OperationalError as exc:
            raise CommandError(f"cannot connect to the database: {exc}\nFor PostgreSQL create it first, e.g. "
                               "createdb -h 127.0.0.1 -U postgres <name>") from None
        call_command("migrate", verbosity=0, interactive=False)

        console.print("2. enqueue")
        results = self.enqueue(console)

        console.print("3. run the worker: manage.py jobs_worker --burst")
        started = time.monotonic()
        db.close()  # the worker process gets the database to itself (one writer on SQLite)
        worker = subprocess.run([sys.executable, "manage.py", "jobs_worker", "--burst"],
                                cwd=Path(settings.BASE_DIR), env=os.environ.copy(), check=False)
        if worker.returncode != 0:
            raise CommandError(f"jobs_worker exited with {worker.returncode}")
        console.print(f"   worker finished in {time.monotonic() - started:.1f}s")

        console.print("4. what happened (ultimate_jobs.ops.get_job)")
        rows = self.show(console, results)
        wrong = [f"{row['name']} ended {row['state']} after {row['attempt']} attempt(s)"
                 for row in rows if (row["state"], row["attempt"]) != EXPECTED[row["name"]]]
        if wrong:
            raise CommandError("unexpected outcome: " + "; ".join(wrong))
        console.print("[green]All four jobs ended as expected.[/green] Run it again for a fresh batch; "
                      "read any job with ultimate_jobs.ops.get_job(id).")

    def enqueue(self, console: Any) -> list[Any]:
        from example_project.shop.jobs import charge_card, fetch_exchange_rate, send_receipt, sync_inventory

        batch = uuid.uuid4().hex[:8]  # fresh keys, so a rerun enqueues new jobs
        results = [
            send_receipt.enqueue(shop="acme", order_id=1001, batch=batch),
            charge_card.enqueue(shop="acme", order_id=1001, amount_cents=4200, batch=batch),
            sync_inventory.enqueue(shop="globex", sku="SKU-404", batch=batch),
            fetch_exchange_rate.enqueue(currency="USD", batch=batch),
        ]
        again = send_receipt.enqueue(shop="acme", order_id=1001, batch=batch)
        console.print(f"   batch {batch}: {len(results)} jobs enqueued; the receipt enqueued again answered "
                      f"deduped={again.deduped} (same id: {again.id == results[0].id})")
        return results

    def show(self, console: Any, results: list[Any]) -> list[dict[str, Any]]:
        from rich.table import Table

        from ultimate_jobs import ops

        table = Table(show_lines=False)
        for column in ("job", "tenant", "state", "attempts", "stop_reason", "last_error"):
            table.add_column(column, overflow="fold")
        rows = []
        for result in results:
            row = ops.get_job(result.id)
            rows.append(row)
            style = {"done": "green", "dead": "red"}.get(row["state"], "yellow")
            table.add_row(row["name"], row["tenant_id"] or "-", f"[{style}]{row['state']}[/{style}]",
                          f"{row['attempt']}/{row['max_attempts']}", row["stop_reason"] or "-",
                          short_error(row["last_error"]))
        console.print(table)
        return rows


def short_error(text: str | None, limit: int = 60) -> str:
    """The last line of a stored traceback (the exception itself), cut to ``limit`` characters."""
    if not text:
        return "-"
    lines = [line for line in text.strip().splitlines() if line.strip() and not line.startswith("(")]
    last = lines[-1].strip() if lines else text.strip()
    return last if len(last) <= limit else last[: limit - 1] + "…"
