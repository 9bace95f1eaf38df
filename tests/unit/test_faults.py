import pytest
from django.db import OperationalError

from ultimate_jobs import faults


@pytest.fixture(autouse=True)
def _disarm():  # type: ignore[no-untyped-def]
    yield
    faults.arm("")


def test_unarmed_points_do_nothing() -> None:
    faults.arm("")
    faults.fault("before_ack")


def test_an_armed_point_raises_on_its_nth_hit_only() -> None:
    faults.arm("before_ack=raise@2")
    faults.fault("before_ack")
    with pytest.raises(OperationalError):
        faults.fault("before_ack")
    faults.fault("before_ack")


def test_unknown_points_and_actions_are_refused() -> None:
    with pytest.raises(ValueError):
        faults.arm("no_such_point=kill")
    with pytest.raises(ValueError):
        faults.arm("before_ack=explode")
