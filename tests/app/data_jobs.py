"""Data-factory jobs the process tests run in real workers (imported by the app's ``ready()``):
an import into ``Product`` and the erase of one customer's data. The storage's folder comes from
``TEST_DATA_STORAGE``, set in the test and in the workers it starts."""

from __future__ import annotations

import os
import tempfile

from django import forms
from django.core.files.storage import FileSystemStorage

from ultimate_jobs import NO_TENANT, Retry, define_subject, import_rows, subject_erase

from .models import Comment, Customer, Effect, Order, OrderLine, Product, Review, SupportTicket


def data_storage() -> FileSystemStorage:
    return FileSystemStorage(location=os.environ.get("TEST_DATA_STORAGE", tempfile.gettempdir()))


class ProductRow(forms.Form):
    sku = forms.CharField(max_length=50)
    name = forms.CharField(max_length=200)
    price = forms.DecimalField(max_digits=12, decimal_places=2)
    stock = forms.IntegerField()


def upsert_products(batch) -> None:
    """At least once per page: an upsert on the natural key, so a page handled twice lands once."""
    Product.objects.bulk_create([Product(**row) for row in batch.rows], update_conflicts=True,
                                unique_fields=["sku"], update_fields=["name", "price", "stock"])
    Effect.objects.create(key=f"import-page:{batch.page}", pid=os.getpid())  # who handled which page


import_products = import_rows(
    name="tests.data.import_products", tenant=NO_TENANT, storage=data_storage, key="uploads/{upload}",
    columns=["sku", "name", "price", "stock"], form=ProductRow, handle=upsert_products, page_bytes=4096,
    batch=50, retry=Retry(attempts=5, delay="50ms"))

customer_subject = define_subject(
    Customer, key="customer_id",
    tables={Customer: {"anonymize": {"name": "erased", "email": "erased@example.invalid", "phone": None,
                                     "org": ""}},
            Order: "delete", OrderLine: "delete", Comment: "delete", SupportTicket: "delete",
            Review: {"retain": "published reviews belong to the shop"}},
    columns={SupportTicket: "customer_ref"})

erase_customer = subject_erase(name="tests.data.erase_customer", tenant=NO_TENANT, subject=customer_subject,
                               page=5, retry=Retry(attempts=5, delay="50ms"))
