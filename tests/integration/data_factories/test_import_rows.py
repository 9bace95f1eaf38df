"""``import_rows()`` on PostgreSQL and SQLite: byte-offset pages, quote-aware record ends, CRLF, a
BOM, characters split by a page edge, the header rule, the Form, the error report (never the
value), the limits, and the refusals."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from django import forms
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage

from tests.app.models import Product
from tests.integration.data_factories.conftest import object_names
from ultimate_jobs import NO_TENANT, JobsError, import_rows, registered_jobs
from ultimate_jobs.models import JobStep
from ultimate_jobs.testing import run_job

pytestmark = pytest.mark.django_db(transaction=True)


class ProductRow(forms.Form):
    sku = forms.CharField(max_length=50)
    name = forms.CharField(max_length=200)
    price = forms.DecimalField(max_digits=12, decimal_places=2)


def upsert(batch) -> None:
    Product.objects.bulk_create([Product(**row) for row in batch.rows], update_conflicts=True,
                                unique_fields=["sku"], update_fields=["name", "price"])


def declare_import(track, disk, **options):
    return track(import_rows(**{"name": "imp.products", "tenant": NO_TENANT, "storage": lambda: disk,
                                "key": "uploads/{upload}", "columns": ["sku", "name", "price"],
                                "form": ProductRow, "handle": upsert, "page_bytes": 1024, **options}))


def upload(disk, name: str, data: bytes) -> None:
    disk.save(f"uploads/{name}", ContentFile(data))


def products() -> dict[str, tuple[str, Decimal]]:
    return {p.sku: (p.name, p.price) for p in Product.objects.all()}


def test_a_file_of_many_pages_is_imported_exactly_with_checkpoints_at_record_ends(track, storage) -> None:
    lines = [f'"Name, {i}\nsecond line ü€",{i}.50,S{i:04d}' for i in range(300)]
    data = "\ufeffname,price,sku\r\n".encode() + "\r\n".join(lines).encode() + b"\r\n"
    upload(storage, "big.csv", data)
    handle = declare_import(track, storage)

    trace = run_job(handle, upload="big.csv")

    assert trace.state == "done", trace.last_error
    result = trace.result
    assert result["rows"] == 300 and result["refused"] == 0 and result["bytes"] == len(data)
    assert result["pages"] > 10  # ~ file / page_bytes
    assert products()[f"S{7:04d}"] == ("Name, 7\nsecond line ü€", Decimal("7.50"))
    assert len(products()) == 300
    # Each checkpoint is a byte offset just after a whole record (a CRLF), never inside one.
    offsets = [s.output["offset"] for s in JobStep.objects.filter(run_id=trace.run_id, name__startswith="page:")]
    for offset in offsets:
        assert data[offset - 2:offset] == b"\r\n"
        assert data[offset:offset + 1] in (b'"', b"")


def test_pages_are_handed_over_as_their_checkpoints_land(track, storage) -> None:
    """Peak memory is a page: page n's rows reach ``handle`` after n page checkpoints, never all at the end."""
    rows = "".join(f"M{i},n{i},{i}\n" for i in range(400))
    upload(storage, "m.csv", f"sku,name,price\n{rows}".encode())
    seen: list[tuple[int, int]] = []

    def handle(batch) -> None:
        landed = JobStep.objects.filter(name__startswith="page:", status="completed").count()
        seen.append((batch.page, landed))

    trace = run_job(declare_import(track, storage, handle=handle), upload="m.csv")
    assert trace.result["pages"] > 3
    assert seen == [(page, page) for page, _ in seen]
    assert [page for page, _ in seen] == sorted({page for page, _ in seen})  # one batch a page here


def test_a_character_split_by_the_page_edge_arrives_whole(track, storage) -> None:
    # Multi-byte characters everywhere, so some page edge falls inside one.
    rows = [f"K{i},{'€' * (i % 7 + 1)}ü,{i}" for i in range(200)]
    upload(storage, "u.csv", ("sku,name,price\n" + "\n".join(rows)).encode())  # no final newline
    trace = run_job(declare_import(track, storage), upload="u.csv")
    assert trace.result["rows"] == 200
    assert products()["K13"] == ("€" * 7 + "ü", Decimal(13))
    assert products()["K199"][0] == "€" * 4 + "ü"


def test_refused_rows_are_reported_by_line_field_and_code_never_the_value(track, storage) -> None:
    secret = "4111-1111-SECRET"
    data = ("sku,name,price\n"
            "A1,ok,1\n"
            f"A2,{secret},not-a-number\n"
            "\n"
            f"A3,\"two\nlines\",{secret}\n"
            "A4,short\n"
            ",noname,3\n").encode()
    upload(storage, "bad.csv", data)
    trace = run_job(declare_import(track, storage), upload="bad.csv")

    assert trace.state == "done"
    assert trace.result["rows"] == 1 and trace.result["refused"] == 4
    prefix = trace.result["error_prefix"]
    assert prefix == f"import-errors/imp.products/{trace.run_id}"
    (report,) = object_names(storage, "import-errors")
    text = storage.open(report).read().decode()
    assert secret not in text
    assert [json.loads(line) for line in text.splitlines()] == [
        {"line": 3, "field": "price", "code": "invalid"},
        {"line": 5, "field": "price", "code": "invalid"},
        {"line": 7, "field": None, "code": "columns"},
        {"line": 8, "field": "sku", "code": "required"},
    ]
    assert set(products()) == {"A1"}


def test_past_max_row_errors_the_run_fails_and_that_batch_is_not_handled(track, storage) -> None:
    rows = "\n".join(f"B{i},n,{'x' if i % 2 else i}" for i in range(40))
    upload(storage, "e.csv", f"sku,name,price\n{rows}\n".encode())
    trace = run_job(declare_import(track, storage, max_row_errors=5, batch=100, page_bytes=4096), upload="e.csv")
    assert trace.state == "dead" and trace.error_code == "X_IMPORT_TOO_MANY_ERRORS"
    assert Product.objects.count() == 0  # the batch that crossed the limit was never handed over
    (report,) = object_names(storage, "import-errors")
    assert len(storage.open(report).read().splitlines()) == 6


def test_max_row_errors_zero_fails_on_the_first_refusal(track, storage) -> None:
    upload(storage, "z.csv", b"sku,name,price\nZ1,a,1\nZ2,b,nope\n")
    trace = run_job(declare_import(track, storage, max_row_errors=0), upload="z.csv")
    assert trace.error_code == "X_IMPORT_TOO_MANY_ERRORS" and Product.objects.count() == 0


@pytest.mark.parametrize("data", [b"", b"\xef\xbb\xbf", b"\n\r\n\n", b"sku,name\nA,b\n", b"sku,name,price,extra\n",
                                  b"sku,name,name\n"])
def test_a_header_that_is_not_exactly_the_columns_is_refused(track, storage, data) -> None:
    upload(storage, "h.csv", data)
    trace = run_job(declare_import(track, storage), upload="h.csv")
    assert trace.state == "dead" and trace.error_code == "X_IMPORT_HEADER_MISMATCH"
    assert Product.objects.count() == 0


def test_an_unclosed_quote_is_a_record_too_large_at_its_byte_offset(track, storage) -> None:
    head = b"sku,name,price\nA1,fine,1\n"
    upload(storage, "q.csv", head + b'A2,"never closed,1\n' + b"A3,x,1\n" * 2000)
    trace = run_job(declare_import(track, storage, max_record_bytes=512), upload="q.csv")
    assert trace.state == "dead" and trace.error_code == "X_IMPORT_RECORD_TOO_LARGE"
    assert f"at byte {len(head)} " in trace.last_error
    assert set(products()) <= {"A1"}


def test_ndjson_without_a_form_and_a_missing_object(track, storage) -> None:
    seen = []
    upload(storage, "p.ndjson", b'\xef\xbb\xbf{"sku": "N1", "name": "a", "price": 1}\n'
                                b'[1]\n{"sku": "N2", "bogus": 1}\n{"sku": "N3"}\n')
    handle = declare_import(track, storage, format="ndjson", form=None, handle=lambda b: seen.extend(b.rows))
    trace = run_job(handle, upload="p.ndjson")
    assert seen == [{"sku": "N1", "name": "a", "price": 1}, {"sku": "N3", "name": None, "price": None}]
    assert trace.result["refused"] == 2

    missing = run_job(handle, upload="nope.ndjson")
    assert missing.state == "dead" and missing.error_code == "X_IMPORT_SOURCE_INVALID"


@pytest.mark.parametrize("options", [{"columns": []}, {"format": "tsv"}, {"handle": None}, {"batch": 0},
                                     {"page_bytes": 10}, {"max_row_errors": -1}, {"form": dict},
                                     {"columns": ["sku", "name"]}, {"tenant": None}, {"key": ""}])
def test_bad_declarations_are_refused(track, storage, options) -> None:
    with pytest.raises(JobsError) as err:
        declare_import(track, storage, **options)
    assert err.value.code in ("X_JOB_DECLARATION_INVALID", "X_JOB_TENANT_REQUIRED")
    assert "imp.products" not in {h.name for h in registered_jobs()}


class CountingStorage(FileSystemStorage):
    """A real file storage that remembers every name it was asked to open."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.opened: list[str] = []

    def _open(self, name, mode="rb"):
        self.opened.append(name)
        return super()._open(name, mode)


@pytest.mark.parametrize("upload_name", ["../globex/payroll.csv", "x/../../globex/payroll.csv",
                                         "..\\globex\\payroll.csv", ".."])
def test_an_input_cannot_walk_the_key_out_of_its_prefix(track, tmp_path, upload_name) -> None:
    disk = CountingStorage(location=str(tmp_path / "objects"))
    disk.save("uploads/globex/payroll.csv", ContentFile(b"sku,name,price\nGLOBEX-SECRET,salary,99999\n"))
    disk.save("uploads/acme/prices.csv", ContentFile(b"sku,name,price\nACME-1,ok,1\n"))
    handle = declare_import(track, disk, tenant="{org}", key="uploads/{org}/{upload}")

    trace = run_job(handle, org="acme", upload=upload_name)

    assert trace.state == "dead" and trace.error_code == "X_IMPORT_SOURCE_INVALID", trace.last_error
    assert disk.opened == [] and not JobStep.objects.filter(run_id=trace.run_id).exists()  # nothing read
    assert not Product.objects.filter(sku="GLOBEX-SECRET").exists() and Product.objects.count() == 0
    assert run_job(handle, org="acme", upload="prices.csv").result["rows"] == 1  # the prefix's own file still reads


def test_an_absolute_or_nul_storage_name_is_refused_before_it_is_opened(track, tmp_path) -> None:
    from urllib.parse import unquote

    disk = CountingStorage(location=str(tmp_path / "objects"))
    disk.save("uploads/globex/payroll.csv", ContentFile(b"sku,name,price\nGLOBEX-SECRET,salary,99999\n"))
    handle = declare_import(track, disk, key=lambda *, path: unquote(path))  # the input is URL-quoted
    for name in (disk.path("uploads/globex/payroll.csv"), "/uploads/globex/payroll.csv", "C:/payroll.csv",
                 "uploads/globex/payroll.csv%00.txt", "uploads/acme/%2e%2e/globex/payroll.csv"):
        trace = run_job(handle, path=name)
        assert trace.error_code == "X_IMPORT_SOURCE_INVALID", (name, trace.last_error)
    assert disk.opened == [] and Product.objects.count() == 0


def test_a_deeply_nested_ndjson_line_is_one_refused_row(track, storage) -> None:
    seen = []
    deep = b'{"sku": "D1", "name": ' + b"[" * 20_000 + b"]" * 20_000 + b"}"
    deeper_than_a_form = b'{"sku": "D2", "name": ' + b"[" * 950 + b"]" * 950 + b', "price": 1}'
    upload(storage, "deep.ndjson", b'{"sku": "N1", "name": "a", "price": 1}\n' + deep + b"\n"
                                   + deeper_than_a_form + b'\n{"sku": "N2", "name": "b", "price": 2}\n')
    handle = declare_import(track, storage, format="ndjson", page_bytes=1024 * 1024,
                            handle=lambda b: seen.extend(r["sku"] for r in b.rows))

    trace = run_job(handle, upload="deep.ndjson")

    assert trace.state == "done", trace.last_error
    assert seen == ["N1", "N2"] and trace.result["refused"] == 2
    (report,) = object_names(storage, "import-errors")
    codes = [json.loads(line) for line in storage.open(report).read().splitlines()]
    assert codes[0] == {"line": 2, "field": None, "code": "too_deep"} and codes[1]["line"] == 3


def test_a_page_of_tiny_records_stays_within_a_small_multiple_of_the_page(tmp_path) -> None:
    """1 MiB of newlines (and 128 KiB of one-byte rows) is one page: its peak is a few pages, not an
    object per record (177 MiB and 11 MiB before)."""
    import tracemalloc

    from ultimate_jobs.factories.import_rows.declaration import Import
    from ultimate_jobs.factories.import_rows.page import run_page

    mib = 1024 * 1024
    disk = FileSystemStorage(location=str(tmp_path))
    disk.save("blank.csv", ContentFile(b"\n" * mib))
    disk.save("tiny.csv", ContentFile(b"x\n" * (mib // 16)))  # 65,536 rows (the cost is per row, not the page)
    seen = [0]
    imp = Import(name="imp.tiny", storage=lambda: disk, errors_storage=lambda: disk, columns=("x",),
                 handle_batch=lambda b: seen.__setitem__(0, seen[0] + len(b.rows)), format="csv", form=None,
                 batch=500, page_bytes=mib, max_record_bytes=64 * 1024, max_row_errors=10)
    for name, rows, size in (("blank.csv", 0, mib), ("tiny.csv", mib // 16, mib // 8)):
        seen[0] = 0
        tracemalloc.start()
        out = run_page(imp, None, {}, key=name, index=0, offset=0, line=1, header=["x"], refused_before=0,
                       error_prefix="errors")
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert out["offset"] == size and out["done"] and seen[0] == rows
        assert peak < 4 * mib, f"{name}: {peak / mib:.1f} MiB for one page of {size:,} bytes"
