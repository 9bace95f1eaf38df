"""A worker's own pass on PostgreSQL sends its settle and claims without a transaction block, one
implicit transaction (an idle pass that claims one queue is one statement, committing without
waiting for its WAL flush). What that must not change: the pass is committed when it returns, as
one transaction; the session's own commit mode is untouched for whatever runs on that connection
next; and a pass made inside the caller's transaction stays inside it."""

from __future__ import annotations

import pytest
from django.db import DataError, connection, transaction

from tests.app.jobs import noop
from tests.support.sessions import second_session
from ultimate_jobs.db import store_for
from ultimate_jobs.db.postgres.jobs import JOB_CLAIM, JOB_CLAIM_ALONE
from ultimate_jobs.db.store import Settlement

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres_only]


def _pass(worker_id: str, settlements: tuple[Settlement, ...] = ()) -> list:
    """One worker pass on the default queue: settle ``settlements``, claim up to 5."""
    answer = store_for("default").job_settle_and_claim(
        settlements=settlements, claims={"default": 5}, names=["tests.noop"], worker_id=worker_id, visibility=30,
        now=None)
    return answer.claimed["default"]


def _session_setting(name: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting(%s)", [name])
        return cursor.fetchone()[0]


def test_a_claim_alone_is_committed_when_it_returns_and_the_session_stays_synchronous() -> None:
    planted = noop.enqueue(key="alone-1").id
    assert _session_setting("synchronous_commit") == "on"
    claimed = _pass("alone-worker")
    assert [row.id for row in claimed] == [planted]
    with second_session(autocommit=True) as other:
        row = other.execute("SELECT state, claimed_by, attempt FROM ultimate_jobs_job WHERE id = %s",
                            [planted]).fetchone()
    assert row == ("running", "alone-worker", 1)
    # The statement's own setting ended with its implicit transaction: the app's next write on this
    # connection still waits for its flush.
    assert _session_setting("synchronous_commit") == "on"


def test_a_claim_inside_the_callers_transaction_rolls_back_with_it() -> None:
    planted = noop.enqueue(key="inside-1").id
    with pytest.raises(RuntimeError, match="undo"), transaction.atomic():
        assert [row.id for row in _pass("inside-worker")] == [planted]
        raise RuntimeError("undo")
    with second_session(autocommit=True) as other:
        row = other.execute("SELECT state, claimed_by, attempt FROM ultimate_jobs_job WHERE id = %s",
                            [planted]).fetchone()
    assert row == ("ready", None, 0)
    assert _session_setting("synchronous_commit") == "on"


def test_the_claim_alone_is_the_claim_with_its_commit_mode_set_inside_it() -> None:
    assert "set_config('synchronous_commit', 'off', true)" in JOB_CLAIM_ALONE
    assert JOB_CLAIM_ALONE.replace(",\n                  set_config('synchronous_commit', 'off', true) AS commit_mode",
                                   "") == JOB_CLAIM


def _states(*ids) -> list[tuple]:
    with second_session(autocommit=True) as other:
        return [other.execute("SELECT state, attempt FROM ultimate_jobs_job WHERE id = %s", [i]).fetchone()
                for i in ids]


def test_a_busy_pass_settles_and_claims_in_one_commit() -> None:
    first = noop.enqueue(key="busy-1").id
    (held,) = _pass("busy-worker")
    second = noop.enqueue(key="busy-2").id
    claimed = _pass("busy-worker", (Settlement(id=held.id, claim=held.claim, state="done", result='{"ok": 1}'),))
    assert [row.id for row in claimed] == [second]
    assert _states(first, second) == [("done", 1), ("running", 1)]
    assert _session_setting("synchronous_commit") == "on"


def test_a_pass_whose_settle_the_database_refuses_claims_nothing_and_the_connection_carries_on() -> None:
    first = noop.enqueue(key="refused-1").id
    (held,) = _pass("refused-worker")
    second = noop.enqueue(key="refused-2").id
    with pytest.raises(DataError):  # not JSON: the settle's cast fails on the server
        _pass("refused-worker", (Settlement(id=held.id, claim=held.claim, state="done", result="{not json"),))
    # The settle and the claim were one transaction: neither landed.
    assert _states(first, second) == [("running", 1), ("ready", 0)]
    claimed = _pass("refused-worker", (Settlement(id=held.id, claim=held.claim, state="done", result="null"),))
    assert [row.id for row in claimed] == [second]
    assert _states(first, second) == [("done", 1), ("running", 1)]
