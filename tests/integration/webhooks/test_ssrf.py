"""The SSRF guard: internal addresses in every spelling are refused terminally, the address checked
is the address connected to, and https is required."""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

import pytest

from tests.integration.webhooks.conftest import Receiver, Tables
from ultimate_jobs import Terminal
from ultimate_jobs.factories.webhook import addresses
from ultimate_jobs.models import WebhookDelivery
from ultimate_jobs.testing import run_job

INTERNAL = [
    "127.0.0.1", "127.1", "0x7f000001", "2130706433", "017700000001", "0177.0.0.1", "localhost", "[::1]",
    "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "169.254.169.254", "[fe80::1]", "10.0.0.1", "172.16.0.1",
    "192.168.1.1", "100.64.0.1", "0.0.0.0", "0", "[::]", "224.0.0.1", "[fd00:ec2::254]", "[fc00::1]",
    "[64:ff9b::a9fe:a9fe]", "[2002:7f00:1::]", "198.18.0.1",
    # IPv4-compatible, IPv4-translated and local-use NAT64 forms (issue 25), in each RFC 6052 layout
    "[::127.0.0.1]", "[::10.0.0.1]", "[::ffff:0:127.0.0.1]", "[::ffff:0:a9fe:a9fe]", "[64:ff9b:1::7f00:1]",
    "[64:ff9b:1::a00:1]", "[64:ff9b:1:7f00:0:100::]", "[64:ff9b:1:a9:fe:a9fe::]", "[64:ff9b:1:0:a9:fea9:fe00:0]",
]


@pytest.mark.parametrize("literal", ["::8.8.8.8", "::ffff:0:8.8.8.8", "64:ff9b:1::8.8.8.8", "64:ff9b::8.8.8.8"])
def test_an_ipv6_form_carrying_a_public_ipv4_is_judged_by_it(literal: str) -> None:
    assert addresses.refusal(ipaddress.ip_address(literal)) is None


def test_the_refusal_names_the_embedded_address() -> None:
    why = addresses.refusal(ipaddress.ip_address("64:ff9b:1::7f00:1"))
    assert why is not None and "127.0.0.1 is a loopback address" in why


@pytest.mark.parametrize("host", INTERNAL)
def test_internal_addresses_are_refused_in_every_spelling(host: str) -> None:
    with pytest.raises(Terminal) as err:
        addresses.target(f"https://{host}/hook", allow_private=False, allow_http=False)
    assert err.value.code == "X_WEBHOOK_ENDPOINT_INVALID"


def fake_resolver(monkeypatch: pytest.MonkeyPatch, answers: dict[str, list[str]]) -> list[str]:
    """Patch the system resolver: ``answers`` for the names given, the real one for the rest."""
    real = socket.getaddrinfo
    asked: list[str] = []

    def resolve(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host in answers:
            asked.append(host)
            return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "",
                     (a, port) if ":" not in a else (a, port, 0, 0)) for a in answers[host]]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    return asked


def test_a_name_resolving_to_a_private_address_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_resolver(monkeypatch, {"hooks.partner.test": ["10.0.0.1"], "mixed.partner.test": ["8.8.8.8", "10.0.0.1"]})
    for name in ("hooks.partner.test", "mixed.partner.test"):  # one internal answer among public ones is enough
        with pytest.raises(Terminal) as err:
            addresses.target(f"https://{name}/hook", allow_private=False, allow_http=False)
        assert "10.0.0.1" in err.value.cause


def test_a_public_address_is_pinned_with_the_name_kept_for_host_and_tls(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_resolver(monkeypatch, {"hooks.partner.test": ["93.184.216.34"], "v6.partner.test": ["2606:4700::1111"]})
    pinned = addresses.target("https://hooks.partner.test/a/b?c=1", allow_private=False, allow_http=False)
    assert (pinned.connect_url, pinned.host_header, pinned.server_name) == (
        "https://93.184.216.34:443/a/b?c=1", "hooks.partner.test", "hooks.partner.test")
    six = addresses.target("https://v6.partner.test:8443/", allow_private=False, allow_http=False)
    assert (six.connect_url, six.host_header) == ("https://[2606:4700::1111]:8443/", "v6.partner.test:8443")


def test_plain_http_and_credentials_are_refused() -> None:
    for url in ("http://8.8.8.8/hook", "ftp://8.8.8.8/", "https://user:pw@8.8.8.8/", "https:///nohost"):
        with pytest.raises(Terminal):
            addresses.target(url, allow_private=False, allow_http=False)
    assert addresses.target("http://8.8.8.8/hook", allow_private=False, allow_http=True).scheme == "http"


@pytest.mark.django_db(transaction=True)
def test_the_name_is_resolved_once_and_the_checked_address_is_the_one_connected_to(
        monkeypatch: pytest.MonkeyPatch, receiver: Receiver, tables: Tables, declare_webhook) -> None:
    # A rebinding resolver: the first answer is the local receiver, any later one an address that
    # would be refused. Only one lookup happens, and the request reaches the first answer.
    port = receiver.server.server_address[1]
    real = socket.getaddrinfo
    asked: list[str] = []

    def rebinding(host: Any, p: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "hooks.rebind.test":
            asked.append(host)
            address = "127.0.0.1" if len(asked) == 1 else "169.254.169.254"
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, p))]
        return real(host, p, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    deliver = declare_webhook(allow_private=True)
    tables.endpoint("ep_1", f"http://hooks.rebind.test:{port}/hook")
    tables.event("evt_1")
    trace = run_job(deliver, endpoint_id="ep_1", event_id="evt_1")
    assert trace.state == "done"
    assert asked == ["hooks.rebind.test"]
    [seen] = receiver.requests
    assert seen.headers["Host"] == f"hooks.rebind.test:{port}"


@pytest.mark.django_db(transaction=True)
def test_a_delivery_to_loopback_without_allow_private_sends_nothing(receiver: Receiver, tables: Tables,
                                                                     declare_webhook, settings) -> None:
    settings.ULTIMATE_JOBS = {**getattr(settings, "ULTIMATE_JOBS", {}), "WEBHOOK_ALLOW_HTTP": True}
    deliver = declare_webhook(allow_private=False)
    port = receiver.server.server_address[1]
    tables.endpoint("ep_1", f"http://0x7f000001:{port}/hook")
    tables.event("evt_1")
    trace = run_job(deliver, endpoint_id="ep_1", event_id="evt_1")
    assert (trace.state, trace.attempt, trace.error_code) == ("dead", 1, "X_WEBHOOK_ENDPOINT_INVALID")
    assert "loopback" in trace.last_error
    assert receiver.requests == []
    assert WebhookDelivery.objects.get().error_code == "X_WEBHOOK_ENDPOINT_INVALID"
