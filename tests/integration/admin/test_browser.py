"""The dead-letter console in a real browser: Debian's chromium driven by Playwright against a
live server. An on-call engineer logs in, filters to dead jobs in the payments queue, opens one,
reads its error and step timeline, retries it from its failed step, and sees it run again.

Each page is shot at 1280 and 1920 px (the overview also dark and at 420 px) into a temporary
directory, and to docs/images/ when ``UPDATE_SCREENSHOTS=1`` (how the docs' pictures are made),
after asserting what a person checks there: the error column at least 30 characters wide, no id
wrapping, the overview's bars adding up to the jobs the test's worker ran.
A missing browser is installed with scripts/install-browser.sh when possible; the test skips,
saying why, only when none can be had.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from tests.factories import JobFactory, JobStepFactory
from ultimate_jobs import NO_TENANT, Retry, ops
from ultimate_jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[3]
WIDE = {"width": 1600, "height": 900}
WIDTHS = (1280, 1920)  # the widths the console must read at; each page is shot at both
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


def _at_widths(page: Any, name: str, tmp_path: Path, check: Any = None) -> None:
    """A screenshot at each width the console must read at (``name-1280.png``, ``name-1920.png``),
    then ``check(page)`` asserts what a person looks for at that width."""
    shots = []
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(100)
        shot = _shot(page, f"{name}-{width}.png", tmp_path)
        if check is not None:
            check(page)  # after the shot, so a failure leaves the picture behind
        shots.append(shot)


# Per error cell: its content width and the width of 30 zeros in its own font; per short id: how
# many line boxes it takes (1 = it does not wrap).
MEASURE = """() => {
  const out = {errors: [], ids: []};
  for (const td of document.querySelectorAll('#result_list td.field-short_error')) {
    const probe = document.createElement('span');
    probe.textContent = '0'.repeat(30);
    probe.style.whiteSpace = 'nowrap';
    probe.style.position = 'absolute';
    probe.style.visibility = 'hidden';
    td.appendChild(probe);
    const need = probe.getBoundingClientRect().width;
    td.removeChild(probe);
    const style = getComputedStyle(td);
    const have = td.getBoundingClientRect().width - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    out.errors.push([have, need]);
  }
  for (const code of document.querySelectorAll('#result_list .uj-id')) { out.ids.push(code.getClientRects().length); }
  return out;
}"""


def _readable_changelist(page: Any) -> None:
    measured = page.evaluate(MEASURE)
    assert measured["errors"], "no error column"
    print(f"viewport {page.viewport_size['width']} px: error column {min(h for h, _ in measured['errors']):.0f} px, "
          f"30 characters {measured['errors'][0][1]:.0f} px, id line boxes {sorted(set(measured['ids']))}")
    for have, need in measured["errors"]:
        assert have >= need - 0.5, f"error column {have:.0f}px < 30 characters ({need:.0f}px)"
    assert measured["ids"] and set(measured["ids"]) == {1}, f"an id wraps: {measured['ids']}"
    # Nothing of the table is cut off under the filter sidebar: the results end left of it.
    table = page.locator("#result_list").bounding_box()
    sidebar = page.locator("#changelist-filter").bounding_box()
    assert table["x"] + table["width"] <= sidebar["x"] + 1 or table["y"] >= sidebar["y"] + sidebar["height"]


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
        browser, live_server, declare, tmp_path: Path, make_worker) -> None:
    @declare(name="payments.capture", queue="payments", idempotency_key="capture:{order_id}",
             tenant=lambda order_id, shop, **_: shop, retry=Retry(attempts=5))
    def capture(ctx, *, order_id: int, shop: str, card: dict) -> dict:
        return {"captured": order_id}

    @declare(name="emails.receipt", queue="emails", idempotency_key="receipt:{order_id}", tenant=NO_TENANT)
    def receipt(ctx, *, order_id: int) -> None: ...

    User.objects.create_superuser("oncall", "oncall@example.com", "correct-horse")
    card = {"last4": "4242", "token": "tok_live_do_not_show"}
    trace = ("Traceback (most recent call last):\n  File \"shop/payments.py\", line 88, in capture\n"
             "    gateway.charge(card)\nConnectionError: card gateway unreachable after 30 s (api_key=[redacted])")
    # Five attempts two minutes apart ending just now, so the screenshot's timeline reads like a real one.
    first = timezone.now() - timedelta(minutes=9)
    attempts = [{"attempt": n, "worker": f"web-{n % 2 + 1}.shop:41{n}",
                 "started_at": (first + timedelta(minutes=2 * (n - 1))).isoformat(),
                 "finished_at": (first + timedelta(minutes=2 * (n - 1), seconds=31)).isoformat(),
                 "outcome": "retried" if n < 5 else "dead",
                 "error_code": "X_GATEWAY_DOWN", "error": trace} for n in range(1, 6)]
    dead = JobFactory(dead=True, name="payments.capture", queue="payments", tenant_id="acme", max_attempts=5,
                      attempt=5, idempotency_key="capture:1042", error_code="X_GATEWAY_DOWN", attempts=attempts,
                      created_at=first, started_at=first, finished_at=first + timedelta(minutes=8, seconds=31),
                      payload={"order_id": 1042, "shop": "acme", "card": card},
                      last_error=trace.replace("[redacted]", "sk_live_123"))
    JobStepFactory(run_id=dead.run_id, name="reserve-stock", status="completed", output={"reserved": 2}, seq=0)
    JobStepFactory(run_id=dead.run_id, name="charge-card", status="failed", executions=5,
                   error="ConnectionError: card gateway unreachable", seq=1, completed_at=None)
    JobFactory(done=True, name="payments.capture", queue="payments", tenant_id="acme", idempotency_key="capture:1042",
               payload={"order_id": 1042, "shop": "acme", "card": card})
    for n in range(3):
        JobFactory(dead=True, name="payments.capture", queue="payments", tenant_id="globex",
                   idempotency_key=f"capture:{2000 + n}", error_code="X_CARD_DECLINED",
                   last_error=f"CardDeclined: issuer said no (order {2000 + n}, do not retry)",
                   payload={"order_id": 2000 + n, "shop": "globex", "card": card})
        JobFactory(done=True, name="emails.receipt", queue="emails", idempotency_key=f"receipt:{n}",
                   payload={"order_id": n})
    JobFactory(name="emails.receipt", queue="emails", idempotency_key="receipt:9", payload={"order_id": 9})
    JobFactory(running=True, name="payments.capture", queue="payments", tenant_id="acme",
               idempotency_key="capture:3001", payload={"order_id": 3001, "shop": "acme", "card": card})

    page = _log_in(browser, live_server, "/admin/ultimate_jobs/job/", "oncall", "correct-horse", "#result_list",
                   viewport={"width": 1280, "height": 900})
    page.locator("#changelist-filter a", has_text="dead").first.click()
    page.wait_for_url("**state__exact=dead**")
    page.locator("#changelist-filter a", has_text="payments").first.click()
    page.wait_for_url("**queue=payments**")
    rows = page.locator("#result_list tbody tr")
    assert rows.count() == 4
    html = page.content()
    assert "tok_live_do_not_show" not in html and "sk_live_123" not in html
    assert "card gateway unreachable" in page.inner_text("#result_list")
    _at_widths(page, "admin-changelist", tmp_path, _readable_changelist)

    page.set_viewport_size({"width": 1280, "height": 900})
    page.locator("#result_list tbody tr", has_text="acme").locator("th a").click()
    page.wait_for_selector("#job-steps")
    assert "charge-card" in page.inner_text("#job-steps") and "failed" in page.inner_text("#job-steps")
    assert "card gateway unreachable" in page.inner_text("#job-error")
    assert page.locator("#job-timeline tr.uj-attempt").count() == 5
    assert page.locator("#job-earlier-runs a").count() == 1
    assert "tok_live_do_not_show" not in page.content() and "sk_live_123" not in page.content()
    _at_widths(page, "admin-job", tmp_path)

    page.set_viewport_size({"width": 1280, "height": 900})
    page.focus("#do-retry-from-failed-step")  # keyboard: the buttons are links in the tab order
    page.keyboard.press("Enter")
    page.wait_for_selector("#uj-confirm")
    assert dead.__class__.objects.get(id=dead.id).state == "dead"  # asked first, nothing done yet
    _shot(page, "admin-confirm-1280.png", tmp_path)
    page.click("#uj-confirm-yes")
    page.wait_for_selector(".messagelist")
    assert "retried from a step" in page.inner_text(".messagelist")
    assert "ready" in page.inner_text("#job-state")
    assert [s["name"] for s in ops.get_job(dead.id)["steps"]] == ["reserve-stock"]

    make_worker(queues=["payments"], burst=True).run(install_signals=False)
    page.reload()
    assert "done" in page.inner_text("#job-state")
    assert page.locator("#job-error").count() == 0  # done: its old failures are history, not "the error"
    assert Job.objects.get(id=dead.id).result == {"captured": 1042}

    page.click("text=Queues")
    page.wait_for_selector("#queues")
    assert page.locator("tr.queue-row[data-queue=payments]").count() == 1
    _at_widths(page, "admin-queues", tmp_path)
    page.close()


def _chart_points(page: Any, queue: str, window: str, kind: str) -> int:
    return int(page.evaluate(
        """([queue, window, kind]) => [...document.querySelectorAll(
             `#uj-queue-${queue} .uj-${window} rect[data-kind="${kind}"]`)]
             .reduce((n, r) => n + Number(r.dataset.count), 0)""", [queue, window, kind]))


def test_the_overview_charts_what_the_workers_ran_at_every_width_and_in_the_dark(
        browser, live_server, declare, tmp_path: Path, make_worker) -> None:
    @declare(name="shop.sync_stock", queue="shop", idempotency_key="sync:{n}", tenant=NO_TENANT)
    def sync(ctx, *, n: int) -> None: ...

    @declare(name="shop.push_invoice", queue="billing", idempotency_key="invoice:{n}", tenant=NO_TENANT,
             retry=Retry(attempts=1))
    def push(ctx, *, n: int) -> None:
        if n % 3 == 0:
            raise ConnectionError(f"ERP timed out on invoice {n}")

    User.objects.create_superuser("oncall", "oncall@example.com", "correct-horse")
    for n in range(12):
        sync.enqueue(n=n)
    for n in range(9):
        push.enqueue(n=n)
    make_worker(queues=["shop", "billing"], burst=True).run(install_signals=False)
    for n in range(100, 104):
        sync.enqueue(n=n)  # waiting: the depth
    live = make_worker(queues=["shop", "billing"])
    live.presence.beat([])

    page = _log_in(browser, live_server, "/admin/ultimate_jobs/", "oncall", "correct-horse", "#uj-overview",
                   viewport={"width": 1280, "height": 900})
    for window in ("hour", "day"):
        assert _chart_points(page, "shop", window, "done") == 12
        assert _chart_points(page, "billing", window, "done") == 6
        assert _chart_points(page, "billing", window, "failed") == 3
    assert page.inner_text("#uj-queue-shop .uj-depth") == "4"
    assert "Workers alive: 1" in page.inner_text("#uj-workers")
    dead_links = page.locator("#uj-dead-jobs a")
    assert dead_links.count() == 3
    _at_widths(page, "admin-overview", tmp_path)

    page.emulate_media(color_scheme="dark")
    page.set_viewport_size({"width": 1280, "height": 900})
    _shot(page, "admin-overview-dark-1280.png", tmp_path)
    page.set_viewport_size({"width": 420, "height": 900})
    assert page.evaluate("document.documentElement.scrollWidth") <= 420 + 1  # no sideways scrolling
    _shot(page, "admin-overview-narrow-420.png", tmp_path)

    # Live: three more jobs land; within a refresh (15 s) the depth reads 7, without a page reload.
    page.emulate_media(color_scheme="light")
    page.set_viewport_size({"width": 1280, "height": 900})
    page.evaluate("window.ujNotReloaded = true")
    for n in range(200, 203):
        sync.enqueue(n=n)
    page.wait_for_function("document.querySelector('#uj-queue-shop .uj-depth').textContent.trim() === '7'",
                           timeout=40_000)
    assert page.evaluate("window.ujNotReloaded === true")

    # Keyboard: a dead job's link is reachable and opens its page.
    dead_links.first.focus()
    page.keyboard.press("Enter")
    page.wait_for_selector("#job-state")
    assert "dead" in page.inner_text("#job-state") and "ERP timed out" in page.inner_text("#job-error")
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
