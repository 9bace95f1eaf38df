"""ops reads scoped to a tenant: another tenant's job answers exactly as an unknown id does."""

from __future__ import annotations

import pytest

from tests.factories import JobFactory
from ultimate_jobs import ops
from ultimate_jobs.errors import JobsError

pytestmark = pytest.mark.django_db(transaction=True)


def refusal(job_id: str, tenant: str) -> tuple[str, str]:
    with pytest.raises(JobsError) as refused:
        ops.get_job(job_id, tenant_id=tenant)
    return refused.value.code, refused.value.cause.replace(job_id, "<id>")


def test_get_job_with_tenant_id_answers_only_that_tenants_job() -> None:
    acme = JobFactory(tenant_id="acme", payload={"invoice": 41})
    globex = JobFactory(tenant_id="globex", payload={"invoice": 42})
    untenanted = JobFactory(tenant_id=None)
    assert ops.get_job(acme.id, tenant_id="acme")["payload"] == {"invoice": 41}
    assert ops.get_job(globex.id)["payload"] == {"invoice": 42}  # unscoped: as before
    unknown = refusal("01234567-89ab-7def-8123-456789abcdef", "acme")
    assert unknown[0] == "X_JOB_NOT_FOUND"
    assert refusal(str(globex.id), "acme") == unknown
    assert refusal(str(untenanted.id), "acme") == unknown


def test_list_jobs_with_tenant_id_lists_only_that_tenant() -> None:
    acme = [str(JobFactory(tenant_id="acme").id) for _ in range(2)]
    JobFactory(tenant_id="globex")
    JobFactory(tenant_id=None)
    assert sorted(j["id"] for j in ops.list_jobs(tenant_id="acme")["jobs"]) == sorted(acme)
