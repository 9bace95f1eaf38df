"""@job refuses a bad declaration at import time, each refusal with a code, a cause and a fix."""

import math

import pytest

from ultimate_jobs import NO_TENANT, Concurrency, JobsError, Retry, job, registered_jobs


def _code(fn) -> str:
    with pytest.raises(JobsError) as err:
        fn()
    assert err.value.cause and err.value.fix
    return err.value.code


def test_missing_idempotency_key_is_refused() -> None:
    assert _code(lambda: job(tenant=NO_TENANT)(lambda ctx: None)) == "X_IDEMPOTENCY_REQUIRED"


def test_missing_tenant_is_refused() -> None:
    assert _code(lambda: job(idempotency_key="k")(lambda ctx: None)) == "X_JOB_TENANT_REQUIRED"


def test_a_second_job_on_one_name_is_refused(declare) -> None:
    @declare(name="unit.dup", idempotency_key="k", tenant=NO_TENANT)
    def first(ctx) -> None: ...

    def second(ctx) -> None: ...

    assert _code(lambda: job(name="unit.dup", idempotency_key="k", tenant=NO_TENANT)(second)) == "X_JOB_DUPLICATE"


@pytest.mark.parametrize("concurrency", [0, -1, 1.5, math.nan, math.inf, True, "2"])
def test_bad_concurrency_is_refused(concurrency: object) -> None:
    def body(ctx, *, a: int) -> None: ...

    code = _code(lambda: job(name="unit.conc", idempotency_key="{a}", tenant=NO_TENANT,
                             concurrency=concurrency)(body))
    assert code == "X_JOB_DECLARATION_INVALID"


def test_bad_concurrency_key_and_when_busy_are_refused() -> None:
    assert _code(lambda: Concurrency(key=42)) == "X_JOB_DECLARATION_INVALID"  # type: ignore[arg-type]
    assert _code(lambda: Concurrency(when_busy="queue")) == "X_JOB_DECLARATION_INVALID"


@pytest.mark.parametrize("option", ["timeout", "step_timeout", "event_poll", "on_settled_timeout"])
@pytest.mark.parametrize("value", ["soon", "-5s", 0, math.nan, math.inf])
def test_bad_durations_are_refused(option: str, value: object) -> None:
    def body(ctx) -> None: ...

    assert _code(lambda: job(name="unit.dur", idempotency_key="k", tenant=NO_TENANT, **{option: value})(body)) \
        == "X_JOB_DECLARATION_INVALID"


@pytest.mark.parametrize("queue", ['a"; DROP TABLE ultimate_jobs_job; --', "with space", "x" * 65, "", "Upper"])
def test_bad_queue_names_are_refused_at_declaration(queue: str) -> None:
    def body(ctx) -> None: ...

    assert _code(lambda: job(name="unit.q", idempotency_key="k", tenant=NO_TENANT, queue=queue)(body)) \
        == "X_JOB_DECLARATION_INVALID"


def test_a_key_naming_an_unknown_input_is_refused() -> None:
    def body(ctx, *, order_id: int) -> None: ...

    assert _code(lambda: job(name="unit.k", idempotency_key="o:{orderid}", tenant=NO_TENANT)(body)) \
        == "X_JOB_DECLARATION_INVALID"


def test_a_function_without_ctx_is_refused() -> None:
    def body() -> None: ...

    assert _code(lambda: job(name="unit.noctx", idempotency_key="k", tenant=NO_TENANT)(body)) \
        == "X_JOB_DECLARATION_INVALID"


def test_bad_names_are_refused() -> None:
    def body(ctx) -> None: ...

    for name in ["", "x" * 201, "tab\tname", " padded"]:
        assert _code(lambda n=name: job(name=n, idempotency_key="k", tenant=NO_TENANT)(body)) \
            == "X_JOB_DECLARATION_INVALID"


def test_the_handle_resolves_its_declaration(declare) -> None:
    @declare(idempotency_key="onboard:{org_id}", tenant=lambda org_id, **_: org_id, queue="onboarding",
             retry=Retry(attempts=5, backoff="linear", delay="2s"), timeout="10m", priority=-1,
             concurrency=Concurrency(key="{org_id}", limit=2, when_busy="fail"))
    def onboard(ctx, *, org_id: str, plan: str = "free") -> dict:
        return {}

    assert onboard.name == f"{__name__}.test_the_handle_resolves_its_declaration.<locals>.onboard"
    assert onboard.queue == "onboarding" and onboard.priority == -1 and onboard.timeout == 600
    assert onboard.retry.attempts == 5
    assert onboard.idempotency_key_for(org_id="acme") == "onboard:acme"
    assert onboard.tenant_for(org_id="acme") == "acme"
    assert onboard.concurrency_key_for(org_id="acme") == f"{onboard.name}:acme"
    described = onboard.describe()
    assert described["concurrency"] == {"limit": 2, "keyed": True, "when_busy": "fail"}
    assert described["idempotent"] is True
    assert [p["name"] for p in described["input"]] == ["org_id", "plan"]
    assert described["input"][1]["required"] is False
    assert onboard in registered_jobs()


def test_calling_the_handle_directly_is_refused_and_names_the_way(declare) -> None:
    @declare(idempotency_key="k", tenant=NO_TENANT)
    def direct(ctx) -> None: ...

    with pytest.raises(JobsError) as err:
        direct(None)
    assert err.value.code == "X_JOB_CALLED_DIRECTLY"
    assert ".enqueue()" in err.value.fix or ".enqueue(" in err.value.fix
    assert "ultimate_jobs.testing" in err.value.fix


def test_an_empty_key_is_an_invariant_error(declare) -> None:
    @declare(idempotency_key=lambda key: key, tenant=NO_TENANT)
    def keyed(ctx, *, key: str) -> None: ...

    with pytest.raises(JobsError) as err:
        keyed.idempotency_key_for(key="")
    assert err.value.code == "X_INVARIANT"


def test_bad_concurrency_keys_are_refused_when_rendered(declare) -> None:
    @declare(idempotency_key="{k}", tenant=NO_TENANT, concurrency=Concurrency(key=lambda k: k))
    def limited(ctx, *, k: object) -> None: ...

    for bad in ["", 7, "x" * 201]:
        with pytest.raises(JobsError) as err:
            limited.concurrency_key_for(k=bad)
        assert err.value.code == "X_JOB_DECLARATION_INVALID"


def test_registered_jobs_are_sorted_by_code_point() -> None:
    names = [h.name for h in registered_jobs()]
    assert names == sorted(names)
    assert "tests.noop" in names


def test_parse_validates_and_answers_the_stored_json_form(declare) -> None:
    import datetime
    import decimal
    import uuid

    @declare(idempotency_key="{ref}", tenant=NO_TENANT)
    def typed(ctx, *, ref: object, when: object = None, amount: object = None) -> None: ...

    ref = uuid.UUID("01234567-89ab-7def-8123-456789abcdef")
    parsed = typed.parse({"ref": ref, "when": datetime.date(2026, 1, 2), "amount": decimal.Decimal("1.50")})
    assert parsed == {"ref": str(ref), "when": "2026-01-02", "amount": "1.50"}
    assert typed.parse('{"ref": "x"}') == {"ref": "x"}
    for bad in [{"ref": object()}, {"when": 1}, {"ref": 1, "extra": 2}, {"ref": "a\x00b"}, {"ref": math.nan},
                {"ref": "\ud800"}, "not json"]:
        with pytest.raises(JobsError) as err:
            typed.parse(bad)
        assert err.value.code == "X_JOB_INPUT_INVALID"
