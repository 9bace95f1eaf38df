"""One person's data: define_subject() walks the foreign keys pointing at a member (on through the
tables the erase deletes) and needs a treatment for every table it reaches; subject_export() writes
one object per page per table plus index.json; subject_erase() deletes children first and the
member's own row last, a page of parent keys a step; subject_proof() plants canaries and proves the
erase leaves none outside a retain. A table left without a treatment fails `manage.py check`.

The models live in a small app ("members") this script writes to a temporary folder, so Django's
app registry finds them as it finds yours. Run in-process with run_job on SQLite.

Run it: python docs/examples/subject.py
"""

import atexit
import json
import sys
import tempfile
from pathlib import Path

import django
from django.conf import settings

TMP = tempfile.TemporaryDirectory()
atexit.register(TMP.cleanup)
APP = Path(TMP.name) / "members"
APP.mkdir()
(APP / "__init__.py").write_text("")
(APP / "models.py").write_text('''
from django.db import models

class Member(models.Model):
    org = models.CharField(max_length=20)                 # the tenant: define_subject(tenant="org")
    name = models.CharField(max_length=100)
    email = models.CharField(max_length=100)
    status = models.CharField(max_length=20, default="active")   # nothing personal: kept

class Post(models.Model):                     # published work: kept
    author = models.ForeignKey(Member, on_delete=models.CASCADE)
    title = models.CharField(max_length=100)

class Comment(models.Model):                  # deleted, and so are the likes on it
    author = models.ForeignKey(Member, on_delete=models.CASCADE)
    parent = models.ForeignKey("self", null=True, on_delete=models.CASCADE)   # a loop: cleared first
    body = models.TextField()

class Like(models.Model):
    comment = models.ForeignKey(Comment, on_delete=models.CASCADE)
    note = models.CharField(max_length=100, default="")

class AuditCopy(models.Model):                # holds the id as text, no foreign key: listed in columns=
    member_ref = models.CharField(max_length=20)
    snapshot = models.TextField()
''')
sys.path.insert(0, TMP.name)
settings.configure(
    INSTALLED_APPS=["ultimate_jobs", "members"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": f"{TMP.name}/jobs.sqlite3"}},
    USE_TZ=True, DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
)
django.setup()

from django.core.files.storage import FileSystemStorage  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.core.management.base import SystemCheckError  # noqa: E402
from django.db import connection  # noqa: E402
from members.models import AuditCopy, Comment, Like, Member, Post  # noqa: E402

from ultimate_jobs import JobsError, define_subject, subject_erase, subject_export  # noqa: E402
from ultimate_jobs.testing import run_job, subject_proof  # noqa: E402

DISK = FileSystemStorage(location=f"{TMP.name}/objects")

member = define_subject(
    Member, key="member_id", tenant="org",
    tables={
        Member: {"anonymize": {"name": "", "email": "erased@example.invalid"}, "keep": ["org", "status"]},
        Post: {"retain": "published work belongs to the org"},
        Comment: "delete",
        "members.Like": "delete",
        AuditCopy: "delete",
    },
    columns={AuditCopy: "member_ref"})

export_member = subject_export(name="members.export", tenant="{org}", subject=member,
                               storage=lambda: DISK, prefix="subjects/{org}/{member_id}", page=2)
erase_member = subject_erase(name="members.erase", tenant="{org}", subject=member, page=2)


def seed(name: str, org: str) -> Member:
    person = Member.objects.create(org=org, name=name, email=f"{name}@example.com")
    Post.objects.create(author=person, title=f"{name}'s post")
    first = Comment.objects.create(author=person, body=f"{name} says hi")
    Comment.objects.create(author=person, parent=first, body=f"{name} again")
    Like.objects.create(comment=first)
    AuditCopy.objects.create(member_ref=str(person.pk), snapshot=f"{name}@example.com")
    return person


def main() -> None:
    with connection.schema_editor() as editor:
        for model in (Member, Post, Comment, Like, AuditCopy):
            editor.create_model(model)
    call_command("migrate", verbosity=0)
    ada, bob = seed("ada", "acme"), seed("bob", "acme")
    Comment.objects.create(author=bob, parent=Comment.objects.get(body="ada says hi"), body="bob answers ada")

    print("reach:", [m._meta.label for m in member.reach().models])
    print("erase order:", [m._meta.label for m in member.reach().order])

    trace = run_job(erase_member, org="globex", member_id=ada.pk)   # another org asks for acme's member
    print("globex asks:", trace.state, trace.error_code, "| steps:", len(trace.steps),
          "| ada intact:", Member.objects.filter(pk=ada.pk, name="ada").exists())

    trace = run_job(export_member, org="acme", member_id=ada.pk)
    index = json.loads(DISK.open(trace.result["index"]).read())
    for table, facts in index["tables"].items():
        print(f"  {table:<18} rows={facts['rows']} {facts['treatment']:<9} parts={len(facts['objects'])}"
              + (f" ({facts['reason']})" if facts["reason"] else ""))

    trace = run_job(erase_member, org="acme", member_id=ada.pk)
    print("erased:", {t: v["rows"] for t, v in trace.result["tables"].items()})
    print("steps:", list(trace.steps))
    print("ada:", Member.objects.filter(pk=ada.pk).values("org", "name", "email", "status").get())
    print("ada's posts kept:", Post.objects.filter(author=ada).count(),
          "| comments:", Comment.objects.filter(author=ada).count(),
          "| bob's answer kept, unparented:", Comment.objects.filter(body="bob answers ada", parent=None).exists())
    print("bob untouched:", Comment.objects.filter(author=bob).count(), Like.objects.count(),
          AuditCopy.objects.filter(member_ref=str(bob.pk)).count())

    report = subject_proof(member)
    print("proof:", report["tables"], "retained:", report["retained"])

    leaky = define_subject(Member, key="member_id", tenant="org", columns={AuditCopy: "member_ref"},
                           tables={**member._tables, Member: {"anonymize": {"name": ""}, "keep": ["org"]}})
    try:
        subject_proof(leaky)
    except JobsError as err:
        print("leak:", err.code, err.cause.split(" still")[0])

    undeclared = define_subject(Member, key="member_id", tables={Member: "delete", Post: "delete",
                                                                 Comment: "delete"})
    try:
        call_command("check")
    except SystemCheckError as err:
        line = next(line for line in str(err).splitlines() if "E010" in line)
        print("check: ultimate_jobs.E010", line.split("] ", 1)[1])
    del undeclared


if __name__ == "__main__":
    main()

# Output:
# reach: ['members.Member', 'members.Post', 'members.Comment', 'members.AuditCopy', 'members.Like']
# erase order: ['members.Post', 'members.AuditCopy', 'members.Like', 'members.Comment', 'members.Member']
# globex asks: dead X_JOB_TENANT_MISMATCH | steps: 0 | ada intact: True
#   members.Member     rows=1 anonymize parts=1
#   members.Post       rows=1 retain    parts=1 (published work belongs to the org)
#   members.Comment    rows=2 delete    parts=1
#   members.AuditCopy  rows=1 delete    parts=1
#   members.Like       rows=1 delete    parts=1
# erased: {'members.Post': 0, 'members.AuditCopy': 1, 'members.Like': 1, 'members.Comment': 2, 'members.Member': 1}
# steps: ['clear:members.Comment.parent:0', 'clear:members.Comment.parent:1', 'members.AuditCopy.member_ref:0', 'members.Like.comment:0', 'members.Like.comment:1', 'members.Comment.author:0', 'subject']
# ada: {'org': 'acme', 'name': '', 'email': 'erased@example.invalid', 'status': 'active'}
# ada's posts kept: 1 | comments: 0 | bob's answer kept, unparented: True
# bob untouched: 3 1 1
# proof: {'members.Member': 1, 'members.Post': 1, 'members.Comment': 1, 'members.AuditCopy': 1, 'members.Like': 1} retained: {'members.Post': ['title']}
# leak: X_SUBJECT_ERASE_INCOMPLETE after the erase, members.Member.email (members_member.email)
# check: ultimate_jobs.E010 the subject members.Member reaches members.Like, with no treatment declared.
