"""One person's data on PostgreSQL and SQLite: the reach from model metadata, the treatments and
their refusals, the check for an undeclared table, the erase (children first, a page of parent keys
a step, replay-safe), the export (a part per page per table, index.json) and subject_proof."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from tests.app.models import Comment, Customer, Invoice, Knot, KnotHead, Order, OrderLine, Review, SupportTicket
from tests.error_codes import refused
from tests.integration.data_factories.conftest import object_names
from tests.support.subjects import TABLES, customer_subject, invoices, person, snapshot
from ultimate_jobs import NO_TENANT, JobsError, define_subject, subject_erase, subject_export
from ultimate_jobs.models import JobStep
from ultimate_jobs.testing import run_job, subject_proof

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_reach_follows_foreign_keys_through_deleted_tables_only() -> None:
    reach = customer_subject().reach()
    labels = [m._meta.label for m in reach.models]
    assert labels[0] == "testapp.Customer"
    assert set(labels) == {"testapp.Customer", "testapp.Order", "testapp.OrderLine", "testapp.Review",
                           "testapp.Comment", "testapp.SupportTicket"}
    order = [m._meta.label for m in reach.order]
    assert order[-1] == "testapp.Customer" and order.index("testapp.OrderLine") < order.index("testapp.Order")
    assert [(e.child, e.field) for e in reach.clears] == [(Comment, "parent_id")]  # the nullable loop, cut


def test_the_erase_deletes_anonymizes_and_retains_only_the_persons_rows(track) -> None:
    ada, bob = person("ada", orders=5), person("bob")
    reply = Comment.objects.create(customer=bob, parent=Comment.objects.filter(customer=ada).first(), body="hi ada")
    before_bob = snapshot(bob)
    handle = track(subject_erase(name="subj.erase", tenant=NO_TENANT, subject=customer_subject(), page=2))

    trace = run_job(handle, customer_id=ada.pk)

    assert trace.state == "done", trace.last_error
    assert snapshot(ada) == {"customer": {"name": "erased", "email": "erased@example.invalid", "phone": None},
                             "orders": 0, "lines": 0, "reviews": ["review by ada"], "comments": 0, "tickets": 0}
    assert snapshot(bob) == before_bob  # the bystander is untouched ...
    reply.refresh_from_db()
    assert reply.parent_id is None      # ... and their reply to a deleted comment is kept, its key cleared
    tables = trace.result["tables"]
    assert trace.result["subject"] == "testapp.Customer" and trace.result["key"] == ada.pk
    assert tables["testapp.OrderLine"] == {"treatment": "delete", "rows": 10}
    assert tables["testapp.Order"] == {"treatment": "delete", "rows": 5}
    assert tables["testapp.Review"] == {"treatment": "retain", "rows": 0}
    assert tables["testapp.Customer"] == {"treatment": "anonymize", "rows": 1}
    steps = list(trace.steps)
    # Children first, one step per page of 2 parent keys (5 orders: 3 pages), the subject last.
    line_steps = [s for s in steps if s.startswith("testapp.OrderLine.")]
    assert line_steps == [f"testapp.OrderLine.order:{i}" for i in range(3)]
    assert steps.index("testapp.OrderLine.order:2") < steps.index("testapp.Order.customer:0")
    assert steps[0].startswith("clear:testapp.Comment.parent") and steps[-1] == "subject"


def test_a_second_erase_changes_nothing(track) -> None:
    ada = person("ada")
    handle = track(subject_erase(name="subj.erase", tenant=NO_TENANT, subject=customer_subject()))
    run_job(handle, customer_id=ada.pk)
    after = (snapshot(ada), Order.objects.count(), OrderLine.objects.count(), Comment.objects.count())
    again = run_job(handle, customer_id=ada.pk)
    assert again.state == "done" and again.result["tables"]["testapp.Order"]["rows"] == 0
    assert (snapshot(ada), Order.objects.count(), OrderLine.objects.count(), Comment.objects.count()) == after


def test_the_export_writes_a_part_per_page_per_table_and_an_index(track, storage) -> None:
    ada, _ = person("ada", orders=3), person("bob")
    handle = track(subject_export(name="subj.export", tenant=NO_TENANT, subject=customer_subject(),
                                  storage=lambda: storage, prefix="subjects/{customer_id}", page=2))

    trace = run_job(handle, customer_id=ada.pk)

    assert trace.state == "done", trace.last_error
    prefix = f"subjects/{ada.pk}/{trace.run_id}"
    names = object_names(storage, "subjects")
    assert f"{prefix}/index.json" in names
    assert [n for n in names if "/testapp.Order/" in n] == [f"{prefix}/testapp.Order/part-{i:05d}.ndjson"
                                                            for i in range(2)]
    index = json.loads(storage.open(f"{prefix}/index.json").read())
    assert index["subject"] == "testapp.Customer" and index["key"] == ada.pk
    assert index["tables"]["testapp.Review"] == {"rows": 1, "treatment": "retain",
                                                 "reason": "published reviews belong to the shop",
                                                 "objects": [f"{prefix}/testapp.Review/part-00000.ndjson"]}
    assert index["tables"]["testapp.OrderLine"]["rows"] == 6
    rows = [json.loads(line) for name in names if "/testapp.OrderLine/" in name
            for line in storage.open(name).read().splitlines()]
    assert {r["sku"] for r in rows} == {f"ada-{o}-{n}" for o in range(3) for n in range(2)}  # never bob's
    tickets = storage.open(f"{prefix}/testapp.SupportTicket/part-00000.ndjson").read()
    assert json.loads(tickets)["subject"] == "ticket of ada"
    assert trace.result["tables"]["testapp.Customer"] == 1


def test_subject_proof_passes_a_complete_declaration() -> None:
    report = subject_proof(customer_subject())
    assert report["tables"]["testapp.OrderLine"] == 1 and report["tables"]["testapp.Customer"] == 1
    assert list(report["retained"]) == ["testapp.Review"]  # the canary kept where a retain says so
    assert Customer.objects.filter(pk=report["key"], name="erased").exists()


def test_subject_proof_names_the_table_and_column_an_erase_leaves() -> None:
    leaky = customer_subject({Customer: {"anonymize": {"name": "erased", "org": ""}}})
    with pytest.raises(JobsError) as err:
        subject_proof(leaky)
    assert err.value.code == "X_SUBJECT_ERASE_INCOMPLETE"
    assert "testapp.Customer.email" in err.value.cause


@pytest.mark.parametrize("change", [
    {Review: {"retain": "  "}},                                   # a blank reason
    {Review: {"keep": "x"}},                                      # an unknown kind
    {Review: "purge"},
    {Customer: {"anonymize": {"nickname": "x"}}},                 # an unknown field
    {Customer: {"anonymize": {"email": None}}},                   # None on a non-null field
    {Customer: {"anonymize": {"id": 0}}},                         # the primary key
    {Customer: "delete", Order: {"retain": "accounting"}},        # a kept row under a deleted parent
    {KnotHead: "delete"},                                         # a table the walk does not reach
])
def test_bad_treatments_are_refused_when_declared(change) -> None:
    with refused("X_SUBJECT_TREATMENT_INVALID"):
        customer_subject(change)


def test_a_kept_row_under_a_deleted_parent_may_clear_its_key() -> None:
    # Comment.parent is nullable: kept comments under a deleted comment are accepted once it is cleared.
    subject = customer_subject({Customer: "delete", Review: "delete"})
    assert subject.reach().order[-1] is Customer


def test_a_loop_of_deleted_tables_without_a_nullable_key_is_refused() -> None:
    with refused("X_SUBJECT_CYCLE"):
        define_subject(KnotHead, key="head", tables={KnotHead: "delete", Knot: "delete"})


def test_an_undeclared_table_fails_the_check_and_the_erase_writes_nothing(track) -> None:
    subject = customer_subject({SupportTicket: None})
    assert subject.undeclared() == ["testapp.SupportTicket"]
    with pytest.raises(SystemCheckError, match="ultimate_jobs.E010") as err:
        call_command("check", "--database", "default")
    assert "X_SUBJECT_TABLE_UNDECLARED" in str(err.value) and "testapp.SupportTicket" in str(err.value)

    ada = person("ada")
    before = snapshot(ada)
    trace = run_job(track(subject_erase(name="subj.undeclared", tenant=NO_TENANT, subject=subject)),
                    customer_id=ada.pk)
    assert trace.state == "dead" and trace.error_code == "X_SUBJECT_TABLE_UNDECLARED"
    assert snapshot(ada) == before and not JobStep.objects.filter(run_id=trace.run_id).exists()


def test_unknown_models_and_shapes_are_refused() -> None:
    for tables in ({"testapp.Nope": "delete"}, {}):
        with refused("X_SUBJECT_TREATMENT_INVALID"):
            define_subject(Customer, key="customer_id", tables=tables)
    with refused("X_SUBJECT_TREATMENT_INVALID"):
        define_subject(Customer, key="customer_id", tables=TABLES, columns={SupportTicket: "nope"})
    with refused("X_SUBJECT_TREATMENT_INVALID"):
        define_subject("Customer", key="customer_id", tables=TABLES)
    assert OrderLine.objects.count() == 0


# -- a subject scoped to its tenant, keep, and a key column of another type (issue 25) ---------------


def test_a_subject_job_for_another_tenants_person_touches_nothing(track, storage) -> None:
    ada, bob = person("ada", org="acme"), person("bob", org="globex")
    ada_before, bob_before = (snapshot(ada), invoices(ada)), (snapshot(bob), invoices(bob))
    subject = customer_subject(tenant="org", invoices=True)
    erase = track(subject_erase(name="subj.erase.tenant", tenant="{org}", subject=subject))
    export = track(subject_export(name="subj.export.tenant", tenant="{org}", subject=subject,
                                  storage=lambda: storage, prefix="subjects/{org}/{customer_id}"))

    for handle in (export, erase):  # globex asks for acme's customer
        trace = run_job(handle, org="globex", customer_id=ada.pk)
        assert trace.state == "dead" and trace.error_code == "X_JOB_TENANT_MISMATCH", trace.last_error
        assert not JobStep.objects.filter(run_id=trace.run_id).exists()
        assert "acme" not in trace.last_error  # the other tenant is not named to the asker
    assert (snapshot(ada), invoices(ada)) == ada_before and (snapshot(bob), invoices(bob)) == bob_before
    assert object_names(storage, "") == []  # nothing exported

    # The person's own tenant: exported and erased, the tenant column kept.
    exported = run_job(export, org="acme", customer_id=ada.pk)
    assert exported.state == "done" and exported.result["tables"]["testapp.Invoice"] == 1
    erased = run_job(erase, org="acme", customer_id=ada.pk)
    assert erased.state == "done", erased.last_error
    assert Customer.objects.filter(pk=ada.pk).values_list("name", "org").get() == ("erased", "acme")
    assert invoices(ada) == [("erased", "paid", "EUR")]
    assert (snapshot(bob), invoices(bob)) == bob_before
    again = run_job(erase, org="acme", customer_id=ada.pk)  # a second request: still the same tenant
    assert again.state == "done", again.last_error


def test_a_key_column_of_another_type_is_cast_to_the_columns_type(track, storage) -> None:
    """``Invoice.customer_ref`` is a CharField holding the integer id: on PostgreSQL the subquery
    compared varchar with bigint before the cast."""
    ada, bob = person("ada"), person("bob")
    subject = customer_subject(invoices=True)
    export = track(subject_export(name="subj.export.text", tenant=NO_TENANT, subject=subject,
                                  storage=lambda: storage, prefix="subjects/{customer_id}"))
    trace = run_job(export, customer_id=ada.pk)
    assert trace.state == "done", trace.last_error
    (part,) = [n for n in object_names(storage, "subjects") if "/testapp.Invoice/" in n]
    assert json.loads(storage.open(part).read())["billing_name"] == "ada billing"

    erased = run_job(track(subject_erase(name="subj.erase.text", tenant=NO_TENANT, subject=subject)),
                     customer_id=ada.pk)
    assert erased.state == "done", erased.last_error
    assert erased.result["tables"]["testapp.Invoice"] == {"treatment": "anonymize", "rows": 1}
    assert invoices(ada) == [("erased", "paid", "EUR")] and invoices(bob) == [("bob billing", "paid", "EUR")]


def test_subject_proof_plants_no_canary_in_keep_tenant_or_key_columns() -> None:
    report = subject_proof(customer_subject(tenant="org", invoices=True))
    assert report["tables"]["testapp.Invoice"] == 1 and list(report["retained"]) == ["testapp.Review"]
    org, = Customer.objects.filter(pk=report["key"]).values_list("org", flat=True)
    assert org and report["token"] not in org  # the tenant column is kept, and held no canary

    # The same tables without keep: the status column holds the canary after the erase, a leak.
    leaky = customer_subject({Invoice: {"anonymize": {"billing_name": "erased"}}}, tenant="org", invoices=True)
    with pytest.raises(JobsError) as err:
        subject_proof(leaky)
    assert err.value.code == "X_SUBJECT_ERASE_INCOMPLETE" and "testapp.Invoice.status" in err.value.cause


@pytest.mark.parametrize("change", [
    {Invoice: {"anonymize": {"billing_name": "x"}, "keep": ["nope"]}},            # an unknown field
    {Invoice: {"anonymize": {"billing_name": "x"}, "keep": ["billing_name"]}},    # anonymized and kept
    {Invoice: {"anonymize": {"billing_name": "x"}, "keep": "status"}},            # not a list
    {Invoice: {"retain": "why", "keep": ["status"]}},                             # keep without anonymize
    {Invoice: {"keep": ["status"]}},
])
def test_a_bad_keep_is_refused_when_declared(change) -> None:
    with refused("X_SUBJECT_TREATMENT_INVALID"):
        customer_subject(change, invoices=True)


def test_a_tenant_path_must_resolve_and_stay_unanonymized() -> None:
    for tenant in ("nope", "org__slug", ""):
        with refused("X_SUBJECT_TREATMENT_INVALID"):
            customer_subject(tenant=tenant)
    with refused("X_SUBJECT_TREATMENT_INVALID"):  # a replayed erase would read the wiped tenant
        customer_subject({Customer: {"anonymize": {"name": "x", "org": ""}}}, tenant="org")


def test_a_subject_job_over_a_tenant_subject_must_have_a_tenant(track) -> None:
    with refused("X_JOB_DECLARATION_INVALID"):
        subject_erase(name="subj.erase.none", tenant=NO_TENANT, subject=customer_subject(tenant="org"))


def test_the_check_warns_when_a_subject_job_has_a_tenant_its_subject_lacks(track) -> None:
    from ultimate_jobs.checks import check_subject_tenants

    untenanted, scoped = customer_subject(), customer_subject(tenant="org")
    track(subject_erase(name="subj.erase.unscoped", tenant="{org}", subject=untenanted))
    track(subject_export(name="subj.export.scoped", tenant="{org}", subject=scoped, storage=lambda: None,
                         prefix="x"))
    track(subject_erase(name="subj.erase.global", tenant=NO_TENANT, subject=untenanted))
    warnings = [w for w in check_subject_tenants() if w.id == "ultimate_jobs.W010"]
    assert [w.msg.split(" ")[0] for w in warnings] == ["subj.erase.unscoped"]
    assert "testapp.Customer" in warnings[0].msg
