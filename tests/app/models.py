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
