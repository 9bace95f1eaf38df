"""The dead-letter console in a real browser: Debian's chromium driven by Playwright against a
live server. An on-call engineer logs in, filters to dead jobs in the payments queue, opens one,
reads its error and step timeline, retries it from its failed step, and sees it run again.

Screenshots of the changelist, a job page and the queues page are written to a temporary
directory, and to docs/images/ when ``UPDATE_SCREENSHOTS=1`` (how the docs' pictures are made).
A missing browser is installed with scripts/install-browser.sh when possible; the test skips,
saying why, only when none can be had.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from tests.factories import JobFactory, JobStepFactory
from ultimate_jobs import NO_TENANT, Retry, Worker, ops
from ultimate_jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]
WIDE = {"width": 1600, "height": 900}  # the pages the docs' screenshots show
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


def _chromium() -> str | None:
    for candidate in (os.environ.get("CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium"),
                      shutil.which("chromium-browser")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install -e '.[dev]' installs it)")
    executable = _chromium()
    if executable is None and os.environ.get("JOBS_NO_BROWSER_INSTALL") != "1":
        subprocess.run(["bash", str(ROOT / "scripts" / "install-browser.sh")], check=False, timeout=1800)
        executable = _chromium()
    if executable is None:
        pytest.skip("no chromium: scripts/install-browser.sh could not install Debian's chromium here")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # Playwright's sync API runs a loop on this thread
    try:
        with sync_playwright() as playwright:
            launched = playwright.chromium.launch(executable_path=executable, args=ARGS)
            yield launched
            launched.close()
    finally:
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


def _shot(page: Any, name: str, tmp_path: Path) -> Path:
    path = tmp_path / name
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000, f"{name} looks empty"
    if os.environ.get("UPDATE_SCREENSHOTS") == "1":
        shutil.copy(path, ROOT / "docs" / "images" / name)
    return path


def _log_in(browser: Any, live_server: Any, path: str, username: str, password: str, ready: str,
            **page_options: Any) -> Any:
    """A new page, logged in through the admin's login form, landed on ``path`` once ``ready`` shows."""
    page = browser.new_page(**page_options)
    page.set_default_timeout(20_000)
    page.goto(f"{live_server.url}/admin/login/?next={path}")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("input[type=submit]")
    page.wait_for_selector(ready)
    return page


def test_an_on_call_engineer_retries_a_dead_job_from_its_failed_step(
        browser, live_server, declare, tmp_path: Path) -> None:
    @declare(name="payments.capture", queue="payments", idempotency_key="capture:{order_id}",
             tenant=lambda order_id, shop, **_: shop, retry=Retry(attempts=5))
    def capture(ctx, *, order_id: int, shop: str, card: dict) -> dict:
        return {"captured": order_id}

    @declare(name="emails.receipt", queue="emails", idempotency_key="receipt:{order_id}", tenant=NO_TENANT)
    def receipt(ctx, *, order_id: int) -> None: ...

    User.objects.create_superuser("oncall", "oncall@example.com", "correct-horse")
    card = {"last4": "4242", "token": "tok_live_do_not_show"}
    dead = JobFactory(dead=True, name="payments.capture", queue="payments", tenant_id="acme", max_attempts=5,
                      attempt=5, idempotency_key="capture:1042", error_code="GATEWAY_DOWN",
                      payload={"order_id": 1042, "shop": "acme", "card": card},
                      last_error="Traceback (most recent call last):\n  ...\nConnectionError: card gateway "
                                 "unreachable (api_key=sk_live_123)")
    JobStepFactory(run_id=dead.run_id, name="reserve-stock", status="completed", output={"reserved": 2}, seq=0)
    JobStepFactory(run_id=dead.run_id, name="charge-card", status="failed", executions=5,
                   error="ConnectionError: card gateway unreachable", seq=1, completed_at=None)
    for n in range(3):
        JobFactory(dead=True, name="payments.capture", queue="payments", tenant_id="globex",
                   idempotency_key=f"capture:{2000 + n}", payload={"order_id": 2000 + n, "shop": "globex",
                                                                   "card": card})
        JobFactory(done=True, name="emails.receipt", queue="emails", idempotency_key=f"receipt:{n}",
                   payload={"order_id": n})
    JobFactory(name="emails.receipt", queue="emails", idempotency_key="receipt:9", payload={"order_id": 9})
    JobFactory(running=True, name="payments.capture", queue="payments", tenant_id="acme",
               idempotency_key="capture:3001", payload={"order_id": 3001, "shop": "acme", "card": card})

    page = _log_in(browser, live_server, "/admin/ultimate_jobs/job/", "oncall", "correct-horse", "#result_list",
                   viewport=WIDE)
    page.evaluate("localStorage.setItem('django.admin.navSidebarIsOpen', 'false')")  # room for the table
    page.reload()

    page.locator("#changelist-filter a", has_text="dead").first.click()
    page.wait_for_url("**state__exact=dead**")
    page.locator("#changelist-filter a", has_text="payments").first.click()
    page.wait_for_url("**queue=payments**")
    rows = page.locator("#result_list tbody tr")
    assert rows.count() == 4
    html = page.content()
    assert "tok_live_do_not_show" not in html and "sk_live_123" not in html
    _shot(page, "admin-changelist.png", tmp_path)

    page.locator("#result_list tbody tr", has_text="acme").locator("th a").click()
    page.wait_for_selector("#job-steps")
    assert "charge-card" in page.inner_text("#job-steps") and "failed" in page.inner_text("#job-steps")
    assert "card gateway unreachable" in page.inner_text("#job-error")
    assert "tok_live_do_not_show" not in page.content() and "sk_live_123" not in page.content()
    _shot(page, "admin-job.png", tmp_path)

    page.click("input[name=retry-from-failed-step]")
    page.wait_for_selector(".messagelist")
    assert "retried from the failed step" in page.inner_text(".messagelist")
    assert "ready" in page.inner_text("#job-state")
    assert [s["name"] for s in ops.get_job(dead.id)["steps"]] == ["reserve-stock"]

    Worker(queues=["payments"], burst=True).run(install_signals=False)
    page.reload()
    assert "done" in page.inner_text("#job-state")
    assert Job.objects.get(id=dead.id).result == {"captured": 1042}

    page.click("text=Queues")
    page.wait_for_selector("#queues")
    assert page.locator("tr.queue-row[data-queue=payments]").count() == 1
    _shot(page, "admin-queues.png", tmp_path)
    page.close()


def test_a_view_only_user_sees_no_buttons_in_the_browser(browser, live_server) -> None:
    from django.contrib.auth.models import Permission

    viewer = User.objects.create_user("support", password="pw-support", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_job"))
    dead = JobFactory(dead=True)
    page = _log_in(browser, live_server, f"/admin/ultimate_jobs/job/{dead.id}/change/", "support", "pw-support",
                   "#job-state")
    assert page.locator("#job-buttons").count() == 0
    page.goto(f"{live_server.url}/admin/ultimate_jobs/job/")
    assert page.locator("select[name=action]").count() == 0
    assert Job.objects.get(id=dead.id).state == "dead"
    page.close()


def test_an_engineer_reads_which_backfill_passes_ran_and_opens_one(
        browser, live_server, tmp_path: Path) -> None:
    from tests.app.jobs import slug_backfill
    from tests.app.models import Post
    from ultimate_jobs.testing import run_job

    User.objects.create_superuser("dba", "dba@example.com", "correct-horse")
    Post.objects.bulk_create([Post(title=f"post {i}") for i in range(250)])
    first = run_job(slug_backfill)
    Post.objects.bulk_create([Post(title=f"late post {i}") for i in range(40)])
    forced = run_job(slug_backfill, force=True)

    page = _log_in(browser, live_server, "/admin/ultimate_jobs/job/backfills/", "dba", "correct-horse", "#backfills",
                   viewport=WIDE)
    declared = page.locator("#declared tr[data-backfill='tests.backfill.slugs']")
    assert "completed" in declared.inner_text()
    passes = page.locator("#backfills tbody tr")
    assert passes.count() == 2
    assert "250" in page.locator(f"tr[data-run='{first.run_id}']").inner_text()
    assert "40" in page.locator(f"tr[data-run='{forced.run_id}']").inner_text()
    _shot(page, "admin-backfills.png", tmp_path)

    page.locator(f"tr[data-run='{first.run_id}'] a", has_text="job").click()
    page.wait_for_selector("#job-backfill")
    assert '"rows": 250' in page.inner_text("#job-backfill")
    assert "batch:2" in page.inner_text("#job-steps")
    page.close()
