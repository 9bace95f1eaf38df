"""The subject the tests declare over the test app's customers, and rows to erase."""

from __future__ import annotations

from typing import Any

from tests.app.models import Comment, Customer, Order, OrderLine, Review, SupportTicket
from ultimate_jobs import define_subject

TABLES: dict[Any, Any] = {
    Customer: {"anonymize": {"name": "erased", "email": "erased@example.invalid", "phone": None, "org": ""}},
    Order: "delete",
    "testapp.OrderLine": "delete",
    Review: {"retain": "published reviews belong to the shop"},
    Comment: "delete",
    SupportTicket: "delete",
}


def customer_subject(changes: dict[Any, Any] | None = None) -> Any:
    """The customer subject, with ``changes`` to its tables (None removes a table)."""
    tables = {**TABLES, **(changes or {})}
    return define_subject(Customer, key="customer_id", tables={k: v for k, v in tables.items() if v is not None},
                          columns={SupportTicket: "customer_ref"})


def person(name: str, *, orders: int = 2, lines: int = 2) -> Customer:
    """A customer with orders (and their lines), a review, a comment, a reply to it and a ticket."""
    customer = Customer.objects.create(name=name, email=f"{name}@example.com", phone="+49 30 1234")
    for o in range(orders):
        order = Order.objects.create(customer=customer, number=f"{name}-{o}", note=f"deliver to {name}")
        OrderLine.objects.bulk_create([OrderLine(order=order, sku=f"{name}-{o}-{n}", note=name)
                                       for n in range(lines)])
    Review.objects.create(customer=customer, body=f"review by {name}")
    comment = Comment.objects.create(customer=customer, body=f"comment by {name}")
    Comment.objects.create(customer=customer, parent=comment, body=f"{name} answering self")
    SupportTicket.objects.create(customer_ref=customer.pk, subject=f"ticket of {name}")
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
