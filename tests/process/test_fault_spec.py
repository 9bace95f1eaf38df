"""The crash tests' fault hook (``ULTIMATE_JOBS_FAULTS``): read as a service starts, armed only with
a second switch (``ULTIMATE_JOBS_FAULTS_ARMED``), so a stray variable in production kills nothing. A
typo'd spec stops a real worker before it claims anything instead of being ignored; a spec without
the switch arms nothing; an armed one is announced and strikes."""

from __future__ import annotations

import pytest

from tests.app import jobs
from ultimate_jobs import JobsError, faults
from ultimate_jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.process
@pytest.mark.parametrize("spec", ["after_claim=kil", "after_clam=kill", "before_ack=sleep:nan",
                                  "before_ack=sleep:-5", "before_ack=sleep:inf"])
def test_a_bad_spec_stops_a_real_worker_before_it_claims_anything(worker_process, spec: str) -> None:
    planted = jobs.noop.enqueue(key=f"fault-spec-{spec}")
    proc = worker_process("--burst", env={"ULTIMATE_JOBS_FAULTS": spec, "ULTIMATE_JOBS_FAULTS_ARMED": "1"})
    assert proc.wait(60) != 0
    assert "X_FAULTS_INVALID" in proc.output()
    row = Job.objects.get(id=planted.id)
    assert (row.state, row.attempt, row.claimed_by) == ("ready", 0, None)


@pytest.mark.process
def test_a_spec_without_the_second_switch_arms_nothing(worker_process) -> None:
    planted = jobs.noop.enqueue(key="fault-unarmed")
    proc = worker_process("--burst", env={"ULTIMATE_JOBS_FAULTS": "after_claim=kill",
                                          "ULTIMATE_JOBS_FAULTS_ARMED": ""})
    assert proc.wait(60) == 0
    assert "jobs.fault.ignored" in proc.output() and "jobs.fault.struck" not in proc.output()
    assert Job.objects.get(id=planted.id).state == "done"


@pytest.mark.process
def test_an_armed_spec_is_announced_and_strikes(worker_process) -> None:
    planted = jobs.noop.enqueue(key="fault-armed")
    proc = worker_process("--burst", env={"ULTIMATE_JOBS_FAULTS": "after_claim=kill",
                                          "ULTIMATE_JOBS_FAULTS_ARMED": "1"})
    assert proc.wait(60) == -9  # SIGKILL, as the spec asked
    assert "jobs.fault.armed points=after_claim" in proc.output()
    assert Job.objects.get(id=planted.id).state == "running"  # stranded until its lease lapses


def test_in_process_a_bad_spec_is_refused_when_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ULTIMATE_JOBS_FAULTS", "before_ack=sleep:1e999")
    monkeypatch.setenv("ULTIMATE_JOBS_FAULTS_ARMED", "1")
    with pytest.raises(JobsError) as err:
        faults.arm(None)
    assert err.value.code == "X_FAULTS_INVALID"
    faults.arm("")
