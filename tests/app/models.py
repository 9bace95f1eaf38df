from django.db import models


class Effect(models.Model):
    """A side effect a test job performed; counted to prove exactly-once execution."""

    key = models.CharField(max_length=200)
    job_id = models.UUIDField(null=True)
    attempt = models.IntegerField(default=0)
    pid = models.IntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.key


class Post(models.Model):
    """Rows a backfill sweeps (integer primary key)."""

    title = models.CharField(max_length=200)
    slug = models.CharField(max_length=200, blank=True, default="")
    org = models.CharField(max_length=50, blank=True, default="")

    def __str__(self) -> str:
        return self.title


class Document(models.Model):
    """Rows a backfill sweeps (UUID primary key: the cursor is a string)."""

    id = models.UUIDField(primary_key=True)
    checked = models.BooleanField(default=False)

    def __str__(self) -> str:
        return str(self.id)


# -- data factories (tests/data_factories): exports, imports, rollups, one person's data ---------


class Customer(models.Model):
    """The person of the subject tests; also what the export tests read."""

    name = models.CharField(max_length=200)
    email = models.CharField(max_length=200)
    phone = models.CharField(max_length=50, null=True, blank=True)
    org = models.CharField(max_length=50, blank=True, default="")
    score = models.IntegerField(default=0)

    def __str__(self) -> str:
        return self.name


class Order(models.Model):
    customer = models.ForeignKey(Customer, on_delete=models.CASCADE, related_name="orders")
    number = models.CharField(max_length=50)
    note = models.TextField(blank=True, default="")
    total = models.DecimalField(max_digits=12, decimal_places=2, default=0)

    def __str__(self) -> str:
        return self.number


class OrderLine(models.Model):
    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="lines")
    sku = models.CharField(max_length=50)
    note = models.TextField(blank=True, default="")

    def __str__(self) -> str:
        return self.sku


class Review(models.Model):
    """Published work: retained by the subject tests."""

    customer = models.ForeignKey(Customer, on_delete=models.CASCADE, related_name="reviews")
    body = models.TextField()

    def __str__(self) -> str:
        return self.body[:20]


class Comment(models.Model):
    """Deleted by the subject tests; ``parent`` is a nullable loop the erase clears first."""

    customer = models.ForeignKey(Customer, on_delete=models.CASCADE, related_name="comments")
    parent = models.ForeignKey("self", on_delete=models.CASCADE, null=True, blank=True, related_name="replies")
    body = models.TextField()

    def __str__(self) -> str:
        return self.body[:20]


class SupportTicket(models.Model):
    """Holds the customer's id with no foreign key: reached only through define_subject(columns=)."""

    customer_ref = models.BigIntegerField()
    subject = models.CharField(max_length=200)

    def __str__(self) -> str:
        return self.subject


class Invoice(models.Model):
    """Holds the customer's id as TEXT with no foreign key (a legacy column): reached through
    define_subject(columns=); anonymized with its status and currency kept."""

    customer_ref = models.CharField(max_length=20)
    status = models.CharField(max_length=20, default="open")
    currency = models.CharField(max_length=3, default="EUR")
    billing_name = models.CharField(max_length=200)

    def __str__(self) -> str:
        return self.billing_name


class KnotHead(models.Model):
    """A subject whose reach holds a loop of deleted tables with no nullable key."""

    name = models.CharField(max_length=50)

    def __str__(self) -> str:
        return self.name


class Knot(models.Model):
    head = models.ForeignKey(KnotHead, on_delete=models.CASCADE)
    prev = models.ForeignKey("self", on_delete=models.CASCADE, related_name="+")

    def __str__(self) -> str:
        return str(self.pk)


class Product(models.Model):
    """What the import tests write."""

    sku = models.CharField(max_length=50, unique=True)
    name = models.CharField(max_length=200)
    price = models.DecimalField(max_digits=12, decimal_places=2)
    stock = models.IntegerField(default=0)

    def __str__(self) -> str:
        return self.sku


class Hit(models.Model):
    """Append-mostly points a rollup counts."""

    org = models.CharField(max_length=50)
    at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.org}@{self.at}"


class DailyHits(models.Model):
    """The rollup's target: one row per (org, day)."""

    org = models.CharField(max_length=50)
    day = models.DateTimeField()
    hits = models.IntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["org", "day"], name="testapp_dailyhits_org_day")]

    def __str__(self) -> str:
        return f"{self.org}@{self.day}"
