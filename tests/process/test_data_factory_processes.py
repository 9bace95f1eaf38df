"""Imports and erases under real worker processes (PostgreSQL and SQLite): a worker SIGKILLed
between a page's writes and its checkpoint, and another worker resuming the run to the exact
result."""

from __future__ import annotations

import signal
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.files.base import ContentFile

from tests.app.data_jobs import data_storage, erase_customer, import_products
from tests.app.models import Comment, Customer, Effect, Order, OrderLine, Product, Review, SupportTicket
from tests.process.conftest import Start, wait_exit, wait_until
from tests.support.subjects import person, snapshot
from ultimate_jobs import ops
from ultimate_jobs.models import Job, JobStep

pytestmark = pytest.mark.process

ROWS = 2000
ARMED = {"ULTIMATE_JOBS_FAULTS_ARMED": "1", "JOBS_TEST_VISIBILITY": "2s"}


@pytest.fixture
def storage_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("TEST_DATA_STORAGE", str(tmp_path))
    return {"TEST_DATA_STORAGE": str(tmp_path)}


def done(job_id: object) -> bool:
    return Job.objects.filter(id=job_id, state="done").exists()


def test_an_import_killed_between_a_pages_writes_and_its_checkpoint_resumes_exactly(
        started_worker: Start, storage_dir: dict[str, str]) -> None:
    rows = [f'P{i:05d},"Näme {i}, ""quoted""\r\nline two",{i}.25,{i % 13}' for i in range(ROWS)]
    data = "\ufeffsku,name,price,stock\r\n".encode() + "\r\n".join(rows).encode() + b"\r\n"
    data_storage().save("uploads/products.csv", ContentFile(data))
    # Step 1 is the header; the 6th page's rows are upserted, then the worker dies before its checkpoint.
    victim = started_worker(env={**storage_dir, **ARMED,
                                 "ULTIMATE_JOBS_FAULTS": "after_step_body_before_checkpoint=kill@7"})
    enqueued = import_products.enqueue(upload="products.csv")
    code, _ = wait_exit(victim, timeout=60)
    assert code == -signal.SIGKILL
    checkpointed = list(JobStep.objects.filter(run_id=enqueued.run_id, status="completed").order_by("seq")
                        .values_list("name", flat=True))
    assert checkpointed == ["header", *(f"page:{i}" for i in range(5))]
    assert Product.objects.count() > 0  # the killed page's writes landed, its checkpoint did not

    rescuer = started_worker(env={**storage_dir, "JOBS_TEST_VISIBILITY": "2s"})
    wait_until(lambda: done(enqueued.id), timeout=90, procs=(rescuer,), what="the resumed import done")

    job = ops.get_job(enqueued.id)
    result = job["result"]
    assert job["attempt"] == 2
    assert (result["rows"], result["refused"], result["bytes"]) == (ROWS, 0, len(data))
    assert Product.objects.count() == ROWS  # every row once: the replayed page upserted the same rows
    p = Product.objects.get(sku="P01234")
    assert (p.name, p.price, p.stock) == ('Näme 1234, "quoted"\r\nline two', Decimal("1234.25"), 1234 % 13)
    steps = {s["name"]: s for s in job["steps"]}
    assert all(steps[name]["executions"] == 1 for name in checkpointed)  # resumed at the page it stopped on
    handled = {}
    for key, pid in Effect.objects.filter(key__startswith="import-page:").values_list("key", "pid"):
        handled.setdefault(int(key.split(":")[1]), set()).add(pid)
    assert all(handled[i] == {victim.pid} for i in range(5))  # finished pages never handled again
    assert handled[5] == {victim.pid, rescuer.pid}             # the killed page: at least once, twice here
    assert set(handled) == set(range(result["pages"]))
    offsets = [steps[f"page:{i}"]["output"]["offset"] for i in range(result["pages"])]
    assert offsets == sorted(offsets) and all(data[o - 2:o] == b"\r\n" for o in offsets)


def test_an_erase_killed_mid_run_resumes_to_the_exact_result(started_worker: Start) -> None:
    ada, bob = person("ada", orders=30, lines=3), person("bob", orders=3)
    ada_orders = list(Order.objects.filter(customer=ada).order_by("pk").values_list("pk", flat=True))
    bob_before = snapshot(bob)
    victim = started_worker(env={**ARMED, "ULTIMATE_JOBS_FAULTS": "after_step_body_before_checkpoint=kill@5"})
    enqueued = erase_customer.enqueue(customer_id=ada.pk)
    code, _ = wait_exit(victim, timeout=60)
    assert code == -signal.SIGKILL
    assert OrderLine.objects.filter(order__customer=ada).count() < 90  # killed midway through the lines

    rescuer = started_worker(env={"JOBS_TEST_VISIBILITY": "2s"})
    wait_until(lambda: done(enqueued.id), timeout=90, procs=(rescuer,), what="the resumed erase done")

    assert snapshot(ada) == {"customer": {"name": "erased", "email": "erased@example.invalid", "phone": None},
                             "orders": 0, "lines": 0, "reviews": ["review by ada"], "comments": 0, "tickets": 0}
    assert snapshot(bob) == bob_before
    assert Customer.objects.get(pk=ada.pk).org == ""
    assert (Order.objects.count(), OrderLine.objects.count(), Comment.objects.count(),
            SupportTicket.objects.count(), Review.objects.count()) == (3, 6, 2, 1, 2)
    job = ops.get_job(enqueued.id)
    steps = {s["name"]: s for s in job["steps"]}
    line_pages = [n for n in steps if n.startswith("testapp.OrderLine.order:")]
    assert len(line_pages) == 7  # 30 orders, 5 parent keys a step (the last page empty)
    assert steps["testapp.OrderLine.order:0"]["output"] == {"cursor": ada_orders[4], "keys": 5, "rows": 15}
    assert steps["subject"]["output"] == 1  # the subject's own row, last
