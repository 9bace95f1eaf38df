"""The subject the tests declare over the test app's customers, and rows to erase."""

from __future__ import annotations

from typing import Any

from tests.app.models import Comment, Customer, Invoice, Order, OrderLine, Review, SupportTicket
from ultimate_jobs import define_subject

TABLES: dict[Any, Any] = {
    Customer: {"anonymize": {"name": "erased", "email": "erased@example.invalid", "phone": None}, "keep": ["org"]},
    Order: "delete",
    "testapp.OrderLine": "delete",
    Review: {"retain": "published reviews belong to the shop"},
    Comment: "delete",
    SupportTicket: "delete",
}


# Invoices hold the customer's id as text: reached only when a test adds them to columns=.
INVOICES = {Invoice: {"anonymize": {"billing_name": "erased"}, "keep": ["status", "currency"]}}


def customer_subject(changes: dict[Any, Any] | None = None, *, tenant: str | None = None,
                     invoices: bool = False) -> Any:
    """The customer subject, with ``changes`` to its tables (None removes a table); ``tenant`` scopes
    it (``"org"``); ``invoices`` adds the text-keyed ``Invoice`` table."""
    tables = {**TABLES, **(INVOICES if invoices else {}), **(changes or {})}
    columns: dict[Any, str] = {SupportTicket: "customer_ref", **({Invoice: "customer_ref"} if invoices else {})}
    return define_subject(Customer, key="customer_id", tables={k: v for k, v in tables.items() if v is not None},
                          columns=columns, tenant=tenant)


def person(name: str, *, orders: int = 2, lines: int = 2, org: str = "") -> Customer:
    """A customer with orders (and their lines), a review, a comment, a reply to it, a ticket and an
    invoice (keyed by the id as text)."""
    customer = Customer.objects.create(name=name, email=f"{name}@example.com", phone="+49 30 1234", org=org)
    for o in range(orders):
        order = Order.objects.create(customer=customer, number=f"{name}-{o}", note=f"deliver to {name}")
        OrderLine.objects.bulk_create([OrderLine(order=order, sku=f"{name}-{o}-{n}", note=name)
                                       for n in range(lines)])
    Review.objects.create(customer=customer, body=f"review by {name}")
    comment = Comment.objects.create(customer=customer, body=f"comment by {name}")
    Comment.objects.create(customer=customer, parent=comment, body=f"{name} answering self")
    SupportTicket.objects.create(customer_ref=customer.pk, subject=f"ticket of {name}")
    Invoice.objects.create(customer_ref=str(customer.pk), billing_name=f"{name} billing", status="paid")
    return customer


def snapshot(customer: Customer) -> dict[str, Any]:
    return {
        "customer": Customer.objects.filter(pk=customer.pk).values("name", "email", "phone").first(),
        "orders": Order.objects.filter(customer=customer).count(),
        "lines": OrderLine.objects.filter(order__customer=customer).count(),
        "reviews": list(Review.objects.filter(customer=customer).values_list("body", flat=True)),
        "comments": Comment.objects.filter(customer=customer).count(),
        "tickets": SupportTicket.objects.filter(customer_ref=customer.pk).count(),
    }


def invoices(customer: Customer) -> list[tuple[str, str, str]]:
    """The customer's invoices (keyed by the id as text): billing name, status, currency."""
    return list(Invoice.objects.filter(customer_ref=str(customer.pk)).values_list("billing_name", "status",
                                                                                  "currency"))
