import pytest

from tests.app.jobs import noop
from ultimate_jobs import Worker, ops


@pytest.mark.django_db(transaction=True)
def test_enqueue_then_work_reaches_done() -> None:
    result = noop.enqueue(key="smoke")
    Worker(queues=["default"], burst=True).run()
    job = ops.get_job(result.id)
    assert job["state"] == "done"
    assert job["result"] == {"key": "smoke", "attempt": 1}
