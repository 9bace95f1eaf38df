"""``export_rows()`` on PostgreSQL and SQLite: keyset pages, one object per page named by its index,
the formula guard, NDJSON, a replayed page rewriting the same bytes, and the refusals."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from tests.app.models import Customer
from tests.integration.data_factories.conftest import object_names
from ultimate_jobs import NO_TENANT, JobsError, export_rows
from ultimate_jobs.models import Job, JobStep
from ultimate_jobs.testing import run_job

pytestmark = pytest.mark.django_db(transaction=True)


def customers(n: int, org: str = "acme") -> list[int]:
    Customer.objects.bulk_create([Customer(name=f"c{i}", email=f"c{i}@example.com", org=org, score=i)
                                  for i in range(n)])
    return list(Customer.objects.filter(org=org).order_by("pk").values_list("pk", flat=True))


def declare_export(track, disk, **options):
    return track(export_rows(**{"name": "exp.customers", "tenant": "{org}",
                                "source": lambda ctx, *, org: Customer.objects.filter(org=org).order_by("-name"),
                                "fields": ["id", "name", "score"], "storage": lambda: disk,
                                "prefix": "exports/{org}", **options}))


def test_pages_become_one_csv_object_each_named_by_index(track, storage) -> None:
    ids = customers(25)
    customers(3, org="other")  # another tenant's rows never leave
    handle = declare_export(track, storage, page=10)

    trace = run_job(handle, org="acme")

    assert trace.state == "done"
    prefix = f"exports/acme/{trace.run_id}"
    assert trace.result == {"pages": 3, "rows": 25, "prefix": prefix,
                            "objects": [f"{prefix}/part-{i:05d}.csv" for i in range(3)]}
    assert object_names(storage, "exports") == [f"{prefix}/part-{i:05d}.csv" for i in range(3)]
    read = []
    for i in range(3):
        lines = storage.open(f"{prefix}/part-{i:05d}.csv").read().decode().split("\r\n")
        assert lines[0] == "id,name,score" and lines[-1] == ""
        read.extend(lines[1:-1])
    assert read == [f"{pk},c{i},{i}" for i, pk in enumerate(ids)]  # by primary key, whatever the order_by
    outputs = {s.name: s.output for s in JobStep.objects.filter(run_id=trace.run_id)}
    assert outputs["part:0"] == {"cursor": ids[9], "rows": 10, "object": f"{prefix}/part-00000.csv"}


def test_the_formula_guard_prefixes_strings_only(track, storage) -> None:
    for name in ("=SUM(A1)", "+1", "-2", "@cmd", "\tx", "\rx", "plain", "a=b"):
        Customer.objects.create(name=name, email="e", org="acme", score=-5)
    handle = declare_export(track, storage)

    trace = run_job(handle, org="acme")

    (part,) = trace.result["objects"]
    import csv
    import io
    rows = list(csv.reader(io.StringIO(storage.open(part).read().decode(), newline="")))
    assert [r[1] for r in rows[1:]] == ["'=SUM(A1)", "'+1", "'-2", "'@cmd", "'\tx", "'\rx", "plain", "a=b"]
    assert {r[2] for r in rows[1:]} == {"-5"}  # a negative number stays a number


def test_the_formula_guard_sees_past_leading_blanks_and_fullwidth_signs(track, storage) -> None:
    planted = [" =HYPERLINK(1)", "\n=cmd", "\u00a0+1", "\u200b@x", "\uff1dSUM(A1)", "\uff0b1", "\uff0d2",
               "\uff20cmd", " plain", "\uff21bc"]
    for name in planted:
        Customer.objects.create(name=name, email="e", org="acme")
    handle = declare_export(track, storage)

    trace = run_job(handle, org="acme")

    (part,) = trace.result["objects"]
    import csv
    import io
    rows = list(csv.reader(io.StringIO(storage.open(part).read().decode(), newline="")))
    assert [r[1] for r in rows[1:]] == ["'" + name for name in planted[:8]] + planted[8:]


def test_ndjson_and_an_exact_multiple_of_the_page(track, storage) -> None:
    ids = customers(20)
    Customer.objects.filter(pk=ids[0]).update(phone=None)
    handle = declare_export(track, storage, format="ndjson", page=10, fields=["id", "name", "phone"])

    trace = run_job(handle, org="acme")

    assert trace.result["pages"] == 2 and trace.result["rows"] == 20
    first = storage.open(trace.result["objects"][0]).read().decode().splitlines()
    assert json.loads(first[0]) == {"id": ids[0], "name": "c0", "phone": None}
    assert len(first) == 10


def test_an_empty_export_writes_one_header_part(track, storage) -> None:
    handle = declare_export(track, storage)
    trace = run_job(handle, org="nobody")
    assert trace.result["pages"] == 1 and trace.result["rows"] == 0
    assert storage.open(trace.result["objects"][0]).read() == b"id,name,score\r\n"


def test_a_page_replayed_without_its_checkpoint_rewrites_the_same_bytes(track, storage) -> None:
    customers(25)
    handle = declare_export(track, storage, page=10)
    trace = run_job(handle, org="acme")
    before = {name: storage.open(name).read() for name in trace.result["objects"]}
    # The window at-least-once opens: the part was written, its checkpoint lost; retry the run.
    JobStep.objects.filter(run_id=trace.run_id, name="part:1").delete()
    Job.objects.filter(id=trace.id).update(state="ready", attempt=0)
    from ultimate_jobs.testing.runner import Runner
    runner = Runner()
    runner.run(runner.claim(trace.id))
    after = {name: storage.open(name).read() for name in object_names(storage, "exports")}
    assert after == before  # same names, same bytes: no duplicate part can exist
    assert JobStep.objects.get(run_id=trace.run_id, name="part:1").executions == 1


def test_a_values_or_sliced_source_is_refused_terminal(track, storage) -> None:
    customers(3)
    handle = declare_export(track, storage, source=lambda ctx, *, org: list(Customer.objects.all()))
    trace = run_job(handle, org="acme")
    assert trace.state == "dead" and trace.error_code == "X_EXPORT_SOURCE_INVALID"
    assert object_names(storage, "") == []


@pytest.mark.parametrize("options", [{"format": "xlsx"}, {"fields": []}, {"fields": "name"}, {"page": 0},
                                     {"prefix": ""}, {"storage": "disk"}, {"tenant": None}])
def test_bad_declarations_are_refused(track, storage, options) -> None:
    with pytest.raises(JobsError) as err:
        declare_export(track, storage, **options)
    assert err.value.code in ("X_JOB_DECLARATION_INVALID", "X_JOB_TENANT_REQUIRED")
    from ultimate_jobs import registered_jobs
    assert "exp.customers" not in {h.name for h in registered_jobs()}


def test_a_decimal_and_no_tenant(track, storage) -> None:
    from tests.app.models import Order
    c = Customer.objects.create(name="x", email="e")
    Order.objects.create(customer=c, number="N1", total=Decimal("12.50"))
    handle = track(export_rows(name="exp.orders", tenant=NO_TENANT, source=lambda ctx: Order.objects.all(),
                               fields=["number", "total", "customer__email"], storage=lambda: storage,
                               prefix="orders"))
    trace = run_job(handle)
    assert storage.open(trace.result["objects"][0]).read() == b"number,total,customer__email\r\nN1,12.50,e\r\n"


def test_each_part_is_written_before_the_next_page_is_read(track, storage) -> None:
    """The memory guard: a streaming pass writes part n when n checkpoints have landed; a pass that
    gathered every page and wrote at the end would show one flat count."""
    customers(35)
    landed: list[int] = []
    original = storage.save

    def recording_save(name, content, max_length=None):
        landed.append(JobStep.objects.filter(name__startswith="part:", status="completed").count())
        return original(name, content, max_length=max_length)

    storage.save = recording_save
    trace = run_job(declare_export(track, storage, page=10), org="acme")
    assert trace.result["pages"] == 4
    assert landed == [0, 1, 2, 3]
