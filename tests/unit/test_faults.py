import pytest
from django.db import OperationalError

from ultimate_jobs import JobsError, faults


@pytest.fixture(autouse=True)
def _disarm():
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
    for spec in ["no_such_point=kill", "before_ack=explode", "before_ack=raise@0", "before_ack=sleep:nan",
                 "before_ack=sleep:inf", "before_ack=sleep:-1"]:
        with pytest.raises(JobsError) as err:
            faults.arm(spec)
        assert err.value.code == "X_FAULTS_INVALID"


def test_armed_takes_a_callable_for_in_process_tests() -> None:
    seen: list[str] = []
    with faults.armed({"leader_before_renew": lambda: seen.append("struck")}):
        faults.fault("leader_before_renew")
    faults.fault("leader_before_renew")
    assert seen == ["struck"]
