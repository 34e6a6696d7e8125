"""Callback URLs a caller chose: refused unless they lead to a public HTTPS address.

A callback URL makes this app send a request wherever the caller says, so without
checks it is a server-side request forgery: the function's own network (metadata
endpoint, private services, loopback) would be one POST away. ``check`` refuses, at
submission and again at delivery:

* anything but ``https`` (``http`` only to loopback, and only with
  ``CALLBACK_ALLOW_LOCAL_HTTP``, for local development), credentials in the URL, and
  hosts outside ``CALLBACK_ALLOWED_HOSTS`` when that allowlist is set;
* every host that resolves to any address outside public unicast: each block of IANA's
  IPv4 and IPv6 special-purpose registries (private, shared 100.64.0.0/10, loopback,
  link-local with 169.254.169.254, documentation, benchmarking, the IETF protocol and
  anycast blocks, Teredo, ...), multicast, 240.0.0.0/4, Azure's wireserver 168.63.129.16,
  and in IPv6 everything outside 2000::/3, the only global unicast space (so site-local
  fec0::/10, unique-local, link-local). ``ipaddress.is_global`` misses several of these,
  so the tables below decide. Forms that embed an IPv4 address (IPv4-mapped, NAT64
  64:ff9b::/96, 6to4 2002::/16) are judged by that address; local-use NAT64
  (64:ff9b:1::/48, whose layout varies) and IPv4-compatible ``::/96`` are refused.
  Names are resolved by the system, so decimal (``2130706433``), hex
  (``0x7f000001``) and short (``127.1``) spellings are judged by what they resolve to.

The delivery then connects to the addresses that were checked (``PinnedResolver``),
so DNS that changes between the check and the connection cannot redirect it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from resumable.base import InvalidRequest

MAX_URL_LENGTH = 2048


# IANA IPv4 Special-Purpose Address Registry (every entry, globally reachable or not),
# multicast, reserved space, and Azure's platform addresses.
_REFUSED_V4 = tuple(
    ipaddress.IPv4Network(block)
    for block in (
        "0.0.0.0/8",  # "this network"
        "10.0.0.0/8",  # private
        "100.64.0.0/10",  # shared address space (carrier-grade NAT)
        "127.0.0.0/8",  # loopback
        "169.254.0.0/16",  # link-local
        "169.254.169.254/32",  # the instance metadata service (IMDS), named on its own
        "168.63.129.16/32",  # Azure's wireserver: platform DNS, health probes, VM agent
        "172.16.0.0/12",  # private
        "192.0.0.0/24",  # IETF protocol assignments: DS-Lite, PCP and TURN anycast, NAT64 discovery
        "192.0.2.0/24",  # documentation (TEST-NET-1)
        "192.31.196.0/24",  # AS112
        "192.52.193.0/24",  # AMT
        "192.88.99.0/24",  # 6to4 relay anycast (deprecated)
        "192.168.0.0/16",  # private
        "192.175.48.0/24",  # AS112 direct delegation
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",  # documentation (TEST-NET-2)
        "203.0.113.0/24",  # documentation (TEST-NET-3)
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, and 255.255.255.255 (limited broadcast)
    )
)
# IPv6: only 2000::/3 is global unicast (IANA's IPv6 address space registry); outside it
# are loopback, unspecified, IPv4-compatible ::/96, discard 100::/64, local-use NAT64,
# SRv6 5f00::/16, unique-local fc00::/7, link-local fe80::/10, site-local fec0::/10 and
# multicast ff00::/8. Inside it, these special-purpose blocks are refused too.
_GLOBAL_UNICAST_V6 = ipaddress.IPv6Network("2000::/3")
_REFUSED_V6 = tuple(
    ipaddress.IPv6Network(block)
    for block in (
        "2001::/23",  # IETF protocol assignments: Teredo, benchmarking, anycast, AMT, AS112, ORCHID, DRIP
        "2001:db8::/32",  # documentation
        "2620:4f:8000::/48",  # AS112 direct delegation
        "3fff::/20",  # documentation
    )
)
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")  # the well-known prefix: the IPv4 is the last 32 bits


class CallbackRefused(InvalidRequest):
    """The callback URL is not one this app will send to."""


@dataclass(frozen=True, slots=True)
class CallbackPolicy:
    allowed_hosts: tuple[str, ...] = ()  # exact names and "*.example.com"; empty: any public host
    allow_local_http: bool = False  # dangerous: http://127.0.0.1:PORT for local development


@dataclass(frozen=True, slots=True)
class CheckedUrl:
    url: str
    scheme: str
    host: str
    port: int
    addresses: tuple[str, ...]


def _host_allowed(host: str, allowed: tuple[str, ...]) -> bool:
    for pattern in allowed:
        if pattern.startswith("*."):
            if host.endswith(pattern[1:]) and host != pattern[2:]:
                return True
        elif host == pattern:
            return True
    return False


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address a mapped, NAT64 (well-known prefix) or 6to4 address leads to."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address.sixtofour


def is_public(address: str) -> bool:
    """Whether ``address`` is public unicast: in no special-purpose, reserved or platform
    block, and (for forms that embed one) leading to a public IPv4 address."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            return is_public(str(embedded))
        if ip not in _GLOBAL_UNICAST_V6 or any(ip in block for block in _REFUSED_V6):
            return False
    elif any(ip in block for block in _REFUSED_V4):
        return False
    return ip.is_global  # belt and braces: never allow what the standard library calls local


def parse(url: object, policy: CallbackPolicy) -> tuple[str, str, int]:
    """Shape checks (no network): (scheme, host, port), or ``CallbackRefused``."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL_LENGTH:
        raise CallbackRefused(f"'callback_url' must be a URL of at most {MAX_URL_LENGTH} characters.")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise CallbackRefused("'callback_url' is not a valid URL.") from None
    host = (parts.hostname or "").rstrip(".").lower()
    if parts.scheme not in ("https", "http") or not host:
        raise CallbackRefused("'callback_url' must be an https:// URL with a host.")
    if parts.scheme == "http" and not policy.allow_local_http:
        raise CallbackRefused("'callback_url' must use https.")
    if parts.username is not None or parts.password is not None:
        raise CallbackRefused("'callback_url' must not carry credentials.")
    if policy.allowed_hosts and not _host_allowed(host, policy.allowed_hosts):
        raise CallbackRefused("'callback_url' names a host that CALLBACK_ALLOWED_HOSTS does not allow.")
    return parts.scheme, host, port or (443 if parts.scheme == "https" else 80)


async def check(url: object, policy: CallbackPolicy) -> CheckedUrl:
    """Parse, resolve and judge ``url``; the addresses to connect to, or ``CallbackRefused``."""
    scheme, host, port = parse(url, policy)
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise CallbackRefused("'callback_url' names a host that does not resolve.") from None
    addresses = tuple(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses:
        raise CallbackRefused("'callback_url' names a host that does not resolve.")
    local = [a for a in addresses if not is_public(a)]
    if scheme == "http":
        # Local development only: plain http, and only to this machine.
        if any(not ipaddress.ip_address(a.split("%", 1)[0]).is_loopback for a in addresses):
            raise CallbackRefused("An http:// 'callback_url' may only point at this machine (loopback).")
    elif local:
        raise CallbackRefused(
            "'callback_url' resolves to a loopback, private, link-local or otherwise non-public address."
        )
    return CheckedUrl(str(url), scheme, host, port, addresses)


class PinnedResolver:
    """An aiohttp resolver that answers only with the addresses ``check`` approved."""

    def __init__(self, checked: CheckedUrl) -> None:
        self._checked = checked

    async def resolve(self, host: str, port: int = 0, family: int = socket.AF_UNSPEC) -> list[dict[str, Any]]:
        if host.rstrip(".").lower() != self._checked.host:
            raise OSError(f"refusing to resolve {host!r}: not the checked callback host")
        return [
            {
                "hostname": host,
                "host": address,
                "port": port,
                "family": socket.AF_INET6 if ":" in address else socket.AF_INET,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
            for address in self._checked.addresses
        ]

    async def close(self) -> None:
        return None
