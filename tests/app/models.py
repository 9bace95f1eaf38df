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
