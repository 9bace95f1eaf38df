"""Exports and imports: export_rows() writes a QuerySet through a Django Storage, one object per
page (the formula guard on strings), and import_rows() reads a CSV back a page of bytes at a time,
each row checked by a Django Form, the refused ones reported as {line, field, code} — never the
value. Both run in-process with run_job on SQLite; the storage is a folder in a temporary directory.

The table is a model declared in this script (app_label "shop") and created with the schema
editor; in a project it is one of your app's models, migrated as usual.

Run it: python docs/examples/exports_imports.py
"""

import atexit
import json
import tempfile

import django
from django.conf import settings
from django.db import connection, models

TMP = tempfile.TemporaryDirectory()
atexit.register(TMP.cleanup)
settings.configure(
    INSTALLED_APPS=["ultimate_jobs"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": f"{TMP.name}/jobs.sqlite3"}},
    USE_TZ=True,
)
django.setup()

from django import forms  # noqa: E402
from django.core.files.base import ContentFile  # noqa: E402
from django.core.files.storage import FileSystemStorage  # noqa: E402

from ultimate_jobs import export_rows, import_rows  # noqa: E402
from ultimate_jobs.testing import run_job  # noqa: E402

DISK = FileSystemStorage(location=f"{TMP.name}/objects")


class Product(models.Model):
    org = models.CharField(max_length=20)
    sku = models.CharField(max_length=20)
    name = models.CharField(max_length=100)
    price = models.DecimalField(max_digits=10, decimal_places=2)

    class Meta:
        app_label = "shop"
        constraints = [models.UniqueConstraint(fields=["org", "sku"], name="shop_product_org_sku")]


export_products = export_rows(
    name="shop.export-products", tenant="{org}",
    source=lambda ctx, *, org: Product.objects.filter(org=org),
    fields=["sku", "name", "price"],
    storage=lambda: DISK, prefix="exports/{org}/products", page=2)


class ProductRow(forms.Form):
    sku = forms.CharField(max_length=20)
    name = forms.CharField(max_length=100)
    price = forms.DecimalField(max_digits=10, decimal_places=2, min_value=0)


def upsert(batch) -> None:
    # At least once per page: an upsert on the natural key lands a replayed page once.
    Product.objects.bulk_create([Product(org=batch.input["org"], **row) for row in batch.rows],
                                update_conflicts=True, unique_fields=["org", "sku"], update_fields=["name", "price"])


import_products = import_rows(
    name="shop.import-products", tenant="{org}", storage=lambda: DISK,
    key="uploads/{org}/{upload}", columns=["sku", "name", "price"], form=ProductRow, handle=upsert,
    errors_prefix="import-errors/{org}", page_bytes=1024)


def main() -> None:
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    with connection.schema_editor() as editor:
        editor.create_model(Product)
    Product.objects.bulk_create([Product(org="acme", sku="A1", name="Anvil", price="19.90"),
                                 Product(org="acme", sku="A2", name="=HYPERLINK(\"x\")", price="5.00"),
                                 Product(org="acme", sku="A3", name="-40 degree rope", price="7.50"),
                                 Product(org="beta", sku="B1", name="Not acme's", price="1.00")])

    trace = run_job(export_products, org="acme")
    result = trace.result
    print("export:", result["pages"], "pages,", result["rows"], "rows")
    for name in result["objects"]:
        print(" ", name.replace(str(trace.run_id), "<run_id>"), DISK.open(name).read())

    csv = ("\ufeffname,price,sku\r\n"                 # a BOM; the header names the columns in any order
           "\"Anvil, heavy\",21.00,A1\r\n"             # quoted: a comma inside a value
           "\"Rope\nsecond line\",7.50,A3\r\n"         # a newline inside quotes is data
           "Card 4111-1111-1111-1111,-1,A9\r\n"        # refused: a negative price
           "Glue,,A4\r\n")                             # refused: no price
    DISK.save("uploads/acme/prices.csv", ContentFile(csv.encode()))
    trace = run_job(import_products, org="acme", upload="prices.csv")
    result = trace.result
    print("import:", {k: result[k] for k in ("rows", "refused", "pages", "bytes")})
    report = f"{result['error_prefix']}/errors-00000.ndjson"
    print("report:", report.replace(str(trace.run_id), "<run_id>"))
    for line in DISK.open(report).read().decode().splitlines():
        print(" ", json.loads(line))                   # line, field, code: never the refused value
    print("acme now:", sorted(Product.objects.filter(org="acme").values_list("sku", "name", "price")))

    DISK.save("uploads/acme/wrong.csv", ContentFile(b"sku,title,price\r\nA1,x,1\r\n"))
    trace = run_job(import_products, org="acme", upload="wrong.csv")
    print("wrong header:", trace.state, trace.error_code)


if __name__ == "__main__":
    main()

# Output:
# export: 2 pages, 3 rows
#   exports/acme/products/<run_id>/part-00000.csv b'sku,name,price\r\nA1,Anvil,19.90\r\nA2,"\'=HYPERLINK(""x"")",5.00\r\n'
#   exports/acme/products/<run_id>/part-00001.csv b"sku,name,price\r\nA3,'-40 degree rope,7.50\r\n"
# import: {'rows': 2, 'refused': 2, 'pages': 1, 'bytes': 114}
# report: import-errors/acme/<run_id>/errors-00000.ndjson
#   {'line': 5, 'field': 'price', 'code': 'min_value'}
#   {'line': 6, 'field': 'price', 'code': 'required'}
# acme now: [('A1', 'Anvil, heavy', Decimal('21.00')), ('A2', '=HYPERLINK("x")', Decimal('5.00')), ('A3', 'Rope\nsecond line', Decimal('7.50'))]
# wrong header: dead X_IMPORT_HEADER_MISMATCH
