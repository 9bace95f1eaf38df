"""``manage.py check`` names what would otherwise fail later: a tenant hook path that does not
import (``ultimate_jobs.E020``), and a declared ``webhook()`` without httpx (``ultimate_jobs.W020``)."""

from __future__ import annotations

import sys

import pytest
from django.core import checks
from django.test import override_settings

from ultimate_jobs import NO_TENANT, webhook
from ultimate_jobs.checks import check_tenant_hooks, check_webhook_transport
from ultimate_jobs.registry import unregister
from ultimate_jobs.webhooks import ModelLedger


@pytest.mark.parametrize("key", ["TENANT_OF", "TENANT_CONTEXT", "ADMIN_TENANT_OF"])
def test_a_tenant_hook_path_that_does_not_import_fails_the_check(key: str) -> None:
    with override_settings(ULTIMATE_JOBS={key: "tests.nowhere.tenant_of"}):
        (message,) = check_tenant_hooks()
    assert (message.id, message.level) == ("ultimate_jobs.E020", checks.ERROR)
    assert message.msg.startswith(f"ULTIMATE_JOBS['{key}']='tests.nowhere.tenant_of' cannot be imported: ")
    assert key in (message.hint or "")


def test_a_tenant_hook_that_names_something_not_callable_fails_and_a_callable_passes() -> None:
    with override_settings(ULTIMATE_JOBS={"TENANT_OF": "string.ascii_letters", "TENANT_CONTEXT": "builtins.str",
                                          "ADMIN_TENANT_OF": "builtins.len"}):
        (message,) = check_tenant_hooks()
    assert message.id == "ultimate_jobs.E020" and "'TENANT_OF'" in message.msg and "not callable" in message.msg
    with override_settings(ULTIMATE_JOBS={"TENANT_OF": "builtins.str"}):
        assert check_tenant_hooks() == []


def test_a_declared_webhook_without_httpx_is_a_check_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    assert check_webhook_transport() == []  # no webhook declared: nothing to send
    handle = webhook(name="tests.checks.hook", tenant=NO_TENANT, endpoint=lambda **_: None, event=lambda **_: None,
                     ledger=ModelLedger())
    try:
        assert check_webhook_transport() == []  # httpx is installed here
        monkeypatch.setitem(sys.modules, "httpx", None)  # as on an install without the webhooks extra
        (message,) = check_webhook_transport()
    finally:
        unregister(handle.name)
    assert (message.id, message.level) == ("ultimate_jobs.W020", checks.WARNING)
    assert "tests.checks.hook" in message.msg and "X_WEBHOOK_HTTPX_MISSING" in message.msg
    assert "ultimate-jobs[webhooks]" in (message.hint or "")
