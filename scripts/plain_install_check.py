#!/usr/bin/env python3
"""The plain-install stage of CI: what a user gets from ``pip install ultimate-jobs``, no extras.

Builds the sdist and the wheel, installs the sdist (so a file missing from it fails here) into a
fresh venv without any extra, copies ``example_project`` next to it (never on the repository's
path, so ``import ultimate_jobs`` can only be the installed package), migrates it on SQLite,
enqueues the demo's four jobs and runs every operator command the README and docs/ show
(``jobs ls/show/stats/tasks/workers/doctor``, human and ``--json``, ``jobs retry``, a bulk ``rm``
without ``--yes``, ``jobs_backfill --pending``, ``jobs_worker --burst``, ``jobs_scheduler --burst``,
``jobs_relay --burst``), checking each exit code and each JSON answer against what this script
enqueued (job names, queues, counts, states, attempts).

usage: python3 scripts/plain_install_check.py [--keep]     (exit 0 when every check passed)
``--keep`` leaves the temporary directory for a look afterwards. Needs network access to PyPI.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# The demo's jobs and how each ends under `jobs_worker --burst` (example_project/shop/jobs.py).
DEMO = {
    "shop.send_receipt": {"queue": "emails", "tenant": "acme", "state": "done", "attempt": 1},
    "shop.charge_card": {"queue": "default", "tenant": "acme", "state": "done", "attempt": 3},
    "shop.sync_inventory": {"queue": "default", "tenant": "globex", "state": "dead", "attempt": 3},
    "shop.fetch_exchange_rate": {"queue": "default", "tenant": None, "state": "done", "attempt": 1},
}
ENQUEUE = """
import json
from example_project.shop.jobs import charge_card, fetch_exchange_rate, send_receipt, sync_inventory
results = {
    "shop.send_receipt": send_receipt.enqueue(shop="acme", order_id=1001, batch="plain"),
    "shop.charge_card": charge_card.enqueue(shop="acme", order_id=1001, amount_cents=4200, batch="plain"),
    "shop.sync_inventory": sync_inventory.enqueue(shop="globex", sku="SKU-404", batch="plain"),
    "shop.fetch_exchange_rate": fetch_exchange_rate.enqueue(currency="USD", batch="plain"),
}
print(json.dumps({name: str(result.id) for name, result in results.items()}))
"""
# Optional libraries a plain install must not bring (each is an extra, or the example's own).
OPTIONAL = ("rich", "httpx", "prometheus-client", "opentelemetry-api", "django-tasks", "django-environ",
            "psycopg-binary")

passed: list[str] = []


class Failed(Exception):
    pass


def check(condition: bool, what: str, detail: Any = "") -> None:
    if not condition:
        raise Failed(f"{what}: {detail}" if detail != "" else what)
    passed.append(what)
    print(f"  ok   {what}", flush=True)


def run(argv: list[str], *, cwd: Path, env: dict[str, str] | None = None, timeout: float = 600,
        expect: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
    shown = " ".join(a if len(a) < 60 else a[:57] + "..." for a in argv)
    print(f"$ {shown}", flush=True)
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode not in expect:
        raise Failed(f"exit {proc.returncode} (expected {expect}) from {shown}\n--- stdout\n{proc.stdout[-3000:]}\n"
                     f"--- stderr\n{proc.stderr[-3000:]}")
    if "Traceback" in proc.stderr:
        raise Failed(f"a traceback from {shown}:\n{proc.stderr[-3000:]}")
    return proc


def main() -> int:
    keep = "--keep" in sys.argv
    tmp = Path(tempfile.mkdtemp(prefix="uj-plain-"))
    started = time.monotonic()
    try:
        stage(tmp)
    except Failed as err:
        print(f"\nFAILED after {len(passed)} checks: {err}", flush=True)
        return 1
    finally:
        if keep:
            print(f"(kept {tmp})")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nplain install: all {len(passed)} checks passed in {time.monotonic() - started:.0f}s")
    return 0


def stage(tmp: Path) -> None:
    python = sys.executable
    print("== build the sdist and the wheel (python -m build, in a throwaway venv)")
    run([python, "-m", "venv", str(tmp / "buildenv")], cwd=tmp)
    run([str(tmp / "buildenv/bin/pip"), "install", "--quiet", "build"], cwd=tmp)
    run([str(tmp / "buildenv/bin/python"), "-m", "build", "--sdist", "--wheel", "--outdir", str(tmp / "dist"),
         str(ROOT)], cwd=tmp)
    sdists, wheels = sorted((tmp / "dist").glob("*.tar.gz")), sorted((tmp / "dist").glob("*.whl"))
    check(len(sdists) == 1 and len(wheels) == 1, "one sdist and one wheel built", [p.name for p in tmp.glob("dist/*")])

    print("== install the sdist with no extras into a fresh venv")
    run([python, "-m", "venv", str(tmp / "venv")], cwd=tmp)
    bin_ = tmp / "venv/bin"
    run([str(bin_ / "pip"), "install", "--quiet", str(sdists[0])], cwd=tmp)
    frozen = run([str(bin_ / "pip"), "freeze"], cwd=tmp).stdout.lower()
    names = {line.split("==")[0].split(" @ ")[0].strip().replace("_", "-") for line in frozen.splitlines()}
    check(not names & set(OPTIONAL), "no optional library installed", sorted(names & set(OPTIONAL)))
    check({"django", "psycopg", "croniter", "ultimate-jobs"} <= names, "the runtime dependencies installed",
          sorted(names))

    app = tmp / "app"
    shutil.copytree(ROOT / "example_project", app / "example_project",
                    ignore=shutil.ignore_patterns("db.sqlite3*", "__pycache__"))
    shutil.copy(ROOT / "manage.py", app / "manage.py")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "DJANGO_SETTINGS_MODULE", "DATABASE_URL", "VIRTUAL_ENV")}
    env["PATH"] = f"{bin_}{os.pathsep}{env.get('PATH', '')}"
    py = str(bin_ / "python")

    def manage(*args: str, expect: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
        return run([py, "manage.py", *args], cwd=app, env=env, expect=expect)

    def manage_json(*args: str, expect: tuple[int, ...] = (0,)) -> Any:
        return json.loads(manage(*args, expect=expect).stdout)

    where = run([py, "-c", "import ultimate_jobs, sys; print(ultimate_jobs.__file__)"], cwd=app, env=env).stdout
    check(where.startswith(str(tmp / "venv")), "ultimate_jobs imports from the installed package", where.strip())

    print("== migrate example_project on SQLite and enqueue the demo")
    manage("migrate", "--noinput")
    check((app / "example_project/db.sqlite3").exists(), "migrate created the SQLite database")
    manage("check")
    ids: dict[str, str] = json.loads(manage("shell", "-c", ENQUEUE).stdout.strip().splitlines()[-1])
    check(set(ids) == set(DEMO), "the demo's four jobs enqueued", ids)

    print("== read: jobs ls / show / stats, before any worker ran")
    page = manage_json("jobs", "ls", "--json")
    check(sorted((j["name"], j["state"], j["queue"], j["tenant_id"]) for j in page["jobs"])
          == sorted((n, "ready", d["queue"], d["tenant"]) for n, d in DEMO.items()),
          "jobs ls --json: the four jobs, ready, on their queues and tenants")
    receipt = manage_json("jobs", "show", ids["shop.send_receipt"], "--json")
    check((receipt["id"], receipt["payload"]) == (ids["shop.send_receipt"],
                                                   {"shop": "acme", "order_id": 1001, "batch": "plain"}),
          "jobs show --json: the receipt with the payload enqueued")
    stats = {q["queue"]: q for q in manage_json("jobs", "stats", "--json")["queues"]}
    check((stats["default"]["ready"], stats["emails"]["ready"]) == (3, 1), "jobs stats --json: 3 ready on default, "
          "1 on emails", {q: s["ready"] for q, s in stats.items()})
    human = manage("jobs", "ls").stdout
    check(all(name in human for name in DEMO) and human.splitlines()[0].split()[:2] == ["id", "state"],
          "jobs ls (plain text, no rich): a header and every job")
    check("emails" in manage("jobs", "stats").stdout, "jobs stats (plain text)")
    pending = manage_json("jobs_backfill", "--pending", "--json")
    check(pending["pending"] == [] and pending["backfills"] == [], "jobs_backfill --pending --json: none declared")
    check("all swept" in manage("jobs_backfill", "--pending").stdout, "jobs_backfill --pending (plain text)")

    print("== run: jobs_worker --burst, jobs_scheduler --burst, jobs_relay --burst")
    manage("jobs_worker", "--burst")
    after = {j["name"]: j for j in manage_json("jobs", "ls", "--json")["jobs"]}
    check({n: (j["state"], j["attempt"]) for n, j in after.items()}
          == {n: (d["state"], d["attempt"]) for n, d in DEMO.items()},
          "jobs_worker --burst: each job ended as the demo says", {n: (j["state"], j["attempt"]) for n, j in
                                                                  after.items()})
    dead = manage_json("jobs", "show", ids["shop.sync_inventory"], "--json")
    check(dead["error_code"] is not None and "SKU-404" in (dead["last_error"] or ""),
          "jobs show --json: the dead job keeps its error", dead["last_error"])
    outcomes = manage_json("jobs", "stats", "--json")["outcomes"]["totals"]
    check((outcomes.get("done"), outcomes.get("dead")) == (3, 1), "jobs stats --json: 3 done and 1 dead settled",
          outcomes)
    manage("jobs_scheduler", "--burst")
    tasks = {t["task"]: t for t in manage_json("jobs", "tasks", "--json")["tasks"]}
    check("ultimate_jobs.retention" in tasks and tasks["ultimate_jobs.retention"]["paused"] is False
          and tasks["ultimate_jobs.retention"]["next_run"], "jobs tasks --json: the retention task, armed", tasks)
    check("ultimate_jobs.retention" in manage("jobs", "tasks").stdout, "jobs tasks (plain text)")
    manage("jobs_relay", "--burst")
    live = manage_json("jobs", "workers", "--json")
    live = live["workers"] if isinstance(live, dict) else live
    check(live == [], "jobs workers --json: none live after the bursts", live)

    print("== doctor, and the operator's writes")
    report = manage_json("jobs", "doctor", "--json")
    check(report["ok"] is True and {c["status"] for c in report["checks"]} <= {"ok", "not-applicable"},
          "jobs doctor --json: healthy, no check skipped", [(c["name"], c["status"]) for c in report["checks"]])
    check("healthy" in manage("jobs", "doctor").stdout, "jobs doctor (plain text): healthy")
    confirm = manage_json("jobs", "rm", "--state", "dead", "--all", "--json", expect=(4,))
    check(confirm["confirm"]["matching"] == 1, "jobs rm --state dead --all without --yes: exit 4, 1 would go", confirm)
    retried = manage_json("jobs", "--by", "plain-check", "retry", ids["shop.sync_inventory"], "--json")
    check((retried["state"], retried["attempt"]) == ("ready", 0), "jobs retry <id>: the dead job is ready again")
    counts = Counter(j["state"] for j in manage_json("jobs", "ls", "--json")["jobs"])
    check(counts == Counter({"done": 3, "ready": 1}), "jobs ls --json: 3 done, 1 ready after the retry", counts)


if __name__ == "__main__":
    sys.exit(main())
