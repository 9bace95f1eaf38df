"""The no-op task bench/django_tasks_bench.py enqueues, the same function on either backend."""

try:
    from django.tasks import task
except ImportError:
    from django_tasks import task


@task()
def noop(i: int) -> None:
    return None
