"""Callback URLs a caller chose: refused unless they lead to a public HTTPS address.

A callback URL makes this app send a request wherever the caller says, so without
checks it is a server-side request forgery: the function's own network (metadata
endpoint, private services, loopback) would be one POST away. ``check`` refuses, at
submission and again at delivery:

* anything but ``https`` (``http`` only to loopback, and only with
  ``CALLBACK_ALLOW_LOCAL_HTTP``, for local development), credentials in the URL, and
  hosts outside ``CALLBACK_ALLOWED_HOSTS`` when that allowlist is set;
* every host whose resolved addresses are not all global: loopback, private,
  link-local (169.254.169.254 included), unique-local (fc00::/7), multicast, reserved,
  shared (100.64.0.0/10), unspecified, and IPv4-mapped or NAT64 forms of those.
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

from resumable.errors import InvalidRequest

MAX_URL_LENGTH = 2048
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


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
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address.sixtofour


def is_public(address: str) -> bool:
    """Whether ``address`` is a global unicast address (and so is any IPv4 it embeds)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(ip)
        if embedded is not None and not is_public(str(embedded)):
            return False
    return ip.is_global and not (ip.is_multicast or ip.is_reserved or ip.is_link_local or ip.is_loopback)


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
