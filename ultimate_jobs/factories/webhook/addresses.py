"""Internal: where a webhook may be sent — the URL rules and the SSRF guard.

The host is resolved once, here, within the delivery's deadline (a resolver that does not answer
in time is a failed delivery, the lookup left to finish on a daemon thread that holds no slot),
every address it resolves to is checked, and the request is then sent to that checked address
(``Target.connect_url``) with the original name in the ``Host`` header and as the TLS server
name, so the certificate is still verified against the name. Nothing resolves the name a second
time, which closes the DNS-rebinding window a "check, then let the HTTP client resolve again"
guard leaves open.

Refused (unless ``allow_private``): every address that is not globally routable — loopback,
RFC 1918 private, link-local (cloud metadata ``169.254.169.254`` among them), CGNAT
``100.64/10``, unspecified ``0.0.0.0``/``::``, multicast, reserved, unique-local ``fc00::/7`` —
also when it hides inside an IPv6 address: every IPv6 form that carries an IPv4 address is judged
by that IPv4 address — IPv4-mapped ``::ffff:a.b.c.d``, IPv4-compatible ``::a.b.c.d``,
IPv4-translated ``::ffff:0:a.b.c.d``, NAT64 ``64:ff9b::/96``, local-use NAT64 ``64:ff9b:1::/48``
(every RFC 6052 layout its bits fit is read, and one internal reading refuses it; one whose IPv4
cannot be located is refused), 6to4, Teredo. Alternative spellings (``127.1``, ``0x7f000001``,
``2130706433``) are whatever the system resolver makes of them, and then checked as addresses.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ultimate_jobs.errors import X_WEBHOOK_DELIVERY_FAILED, X_WEBHOOK_ENDPOINT_INVALID, JobsError, Terminal

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_LOCAL_NAT64 = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215: the operator picks the layout
_COMPATIBLE = ipaddress.ip_network("::/96")  # ::a.b.c.d (deprecated, RFC 4291)
_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # ::ffff:0:a.b.c.d (SIIT, RFC 2765)
# RFC 6052 layouts inside a /48: (prefix length, IPv4 byte positions, suffix byte positions).
_LAYOUTS = ((48, (6, 7, 9, 10), range(11, 16)), (56, (7, 9, 10, 11), range(12, 16)),
            (64, (9, 10, 11, 12), range(13, 16)))
# Metadata endpoints that are not covered by "not global" on every Python (AWS's IPv6 one is in
# fd00::/8, which is; listed anyway so the rule reads in one place).
_METADATA = {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254"),
             ipaddress.ip_address("100.100.100.200")}


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """Where one request goes: the URL with the checked address in place of the name."""

    connect_url: str
    host_header: str
    server_name: str
    address: str
    scheme: str


def embedded_ipv4s(address: IPAddress) -> list[ipaddress.IPv4Address] | None:
    """The IPv4 address(es) an IPv6 one may carry, or None when it is no IPv4-carrying form.

    One for the fixed forms (mapped, compatible, translated, NAT64, 6to4, Teredo); for a local-use
    NAT64 address every reading an RFC 6052 layout allows (an empty list: none fits)."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    last32 = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.ipv4_mapped is not None:
        return [address.ipv4_mapped]
    if address in _TRANSLATED or address in _NAT64:
        return [last32]
    if address in _COMPATIBLE:  # '::' and '::1' are the unspecified and loopback addresses themselves
        return None if int(address) <= 1 else [last32]
    if address in _LOCAL_NAT64:
        packed = address.packed
        found = [last32] if int(last32) else []  # the /96 layout
        for _, positions, suffix in _LAYOUTS:  # the others: the u-octet (byte 8) and the suffix are zero
            if packed[8] == 0 and not any(packed[i] for i in suffix):
                candidate = ipaddress.IPv4Address(bytes(packed[i] for i in positions))
                if int(candidate) and candidate not in found:
                    found.append(candidate)
        return found
    if address.sixtofour is not None:
        return [address.sixtofour]
    if address.teredo is not None:
        return [address.teredo[1]]
    return None


def embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The (first) IPv4 address an IPv6 one carries, else None."""
    found = embedded_ipv4s(address)
    return found[0] if found else None


def refusal(address: IPAddress) -> str | None:
    """Why ``address`` may not be connected to without ``allow_private``, or None."""
    inner = embedded_ipv4s(address)
    if inner is not None:
        if not inner:
            return f"{address} is a local-use NAT64 address whose IPv4 address cannot be located"
        for one in inner:
            why = refusal(one)
            if why is not None:
                return f"{why} (inside {address})"
        return None
    if address in _METADATA:
        return f"{address} is a cloud metadata address"
    if address.is_unspecified:
        return f"{address} is the unspecified address"
    if address.is_loopback:
        return f"{address} is a loopback address"
    if address.is_link_local:
        return f"{address} is a link-local address"
    if address.is_multicast:
        return f"{address} is a multicast address"
    if address.is_private or not address.is_global:
        return f"{address} is a private or reserved address"
    return None


def _lookup(host: str, port: int, timeout: float | None) -> list[Any]:
    """``getaddrinfo`` within ``timeout`` seconds: it has no timeout of its own, so it runs on a
    daemon thread this one stops waiting for (the lookup then ends on the resolver's own limits)."""
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None or timeout is None:  # a literal never asks a server
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    answer: list[Any] = []
    done = threading.Event()

    def look() -> None:
        try:
            answer.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except (OSError, UnicodeError) as exc:
            answer.append(exc)
        finally:
            done.set()

    threading.Thread(target=look, name="ultimate-jobs-resolve", daemon=True).start()
    if not done.wait(max(0.0, timeout)):
        raise TimeoutError(f"no answer within the delivery's {timeout:.3g}s left")
    if isinstance(answer[0], BaseException):
        raise answer[0]
    return list(answer[0])


def resolve(host: str, port: int, timeout: float | None = None) -> list[IPAddress]:
    """Every address the system resolver answers for ``host`` within ``timeout`` seconds (a DNS
    failure is retried later)."""
    try:
        infos = _lookup(host, port, timeout)
    except (OSError, UnicodeError) as exc:
        raise JobsError(X_WEBHOOK_DELIVERY_FAILED, f"the endpoint's host could not be resolved "
                        f"({type(exc).__name__}: {exc}).") from None
    found: list[IPAddress] = []
    for info in infos:
        text = str(info[4][0]).split("%", 1)[0]  # drop an IPv6 zone id
        address = ipaddress.ip_address(text)
        if address not in found:
            found.append(address)
    if not found:
        raise JobsError(X_WEBHOOK_DELIVERY_FAILED, "the endpoint's host resolved to no address.")
    return found


def target(url: str, *, allow_private: bool, allow_http: bool, timeout: float | None = None) -> Target:
    """Check ``url`` and pin it to one checked address; raise ``Terminal(X_WEBHOOK_ENDPOINT_INVALID)``."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except (ValueError, TypeError, AttributeError):
        raise Terminal("the endpoint URL does not parse.", code=X_WEBHOOK_ENDPOINT_INVALID) from None
    scheme = parts.scheme.lower()
    host = parts.hostname
    if scheme not in ("https", "http") or not host or parts.username is not None or parts.password is not None:
        raise Terminal("the endpoint URL must be https://host/path with no credentials in it.",
                       code=X_WEBHOOK_ENDPOINT_INVALID)
    if scheme == "http" and not (allow_private or allow_http):
        raise Terminal("the endpoint URL is plain http://; webhooks are sent over https only.",
                       code=X_WEBHOOK_ENDPOINT_INVALID,
                       fix='Use https://, or set ULTIMATE_JOBS["WEBHOOK_ALLOW_HTTP"] = True for a development '
                           "receiver.")
    port = port or (443 if scheme == "https" else 80)
    addresses = resolve(host, port, timeout)
    if not allow_private:
        for address in addresses:
            why = refusal(address)
            if why is not None:
                raise Terminal(f"the endpoint's host resolves to {why}; webhooks are not sent to internal "
                               "addresses.", code=X_WEBHOOK_ENDPOINT_INVALID)
    chosen = addresses[0]
    literal = f"[{chosen}]" if chosen.version == 6 else str(chosen)
    default_port = 443 if scheme == "https" else 80
    name = f"[{host}]" if ":" in host else host
    host_header = name if port == default_port else f"{name}:{port}"
    path = parts.path or "/"
    query = f"?{parts.query}" if parts.query else ""
    return Target(connect_url=f"{scheme}://{literal}:{port}{path}{query}", host_header=host_header,
                  server_name=host, address=str(chosen), scheme=scheme)
