"""Faults at the storage SDK boundary, per registered write site (the fault matrix's tool).

``WriteFaults`` wraps the real HTTP transport of every storage client the app builds
(``resumable.storage.clients.transport_hook``): it sits below the SDK's retry policy, so
what it does is what a network does, and the SDK reacts as it would in production. It
classifies every write request that leaves the client (method, headers, query, blob name)
into a ``write_sites.Kind`` and the registered ``WriteSite`` it belongs to; a write that
matches no site is recorded in ``unregistered`` (the runtime half of the registry's test).

One fault at a time can be armed on a site (``arm``), hitting its next matching write:

* ``retry``: the request is sent and lands, then its answer is lost (a timeout); the SDK's
  own retry then meets the landed write (409 on a create, 412 on a replace, 404 on a delete,
  a second message on a send).
* ``lost``: the request lands, and every answer is lost: the retries time out too, unsent,
  and the caller sees an outage for a write that happened.
* ``outage``: no attempt is sent (connection refused): the caller sees an outage and
  nothing landed.
* ``rival``: just before the write, ``rival`` runs (another instance commits a turn on the
  same thread), then the write goes out as it was.
* ``retry_rival``: the write lands and its answer is lost, then ``rival`` commits on top of
  it before the SDK's retry meets both.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
from azure.core.exceptions import ServiceRequestError, ServiceResponseError
from azure.core.pipeline.transport import AioHttpTransport, AsyncHttpTransport
from azure.storage.blob.aio import LinearRetry as BlobLinearRetry
from azure.storage.queue._shared.policies_async import LinearRetry as QueueLinearRetry

from devtools.relay_transport import RelayTransport
from resumable.storage import clients as storage_client
from resumable.storage.write_sites import SITES, Kind, WriteSite, site_for

FAULTS = ("retry", "lost", "outage", "rival", "retry_rival")
# Attempts per operation: the clients' LinearRetry(retry_total=2) makes three.
ATTEMPTS = 3


@dataclass(frozen=True)
class Write:
    """One write request as it left the client."""

    service: str  # "blob" or "queue"
    method: str
    kind: Kind | str  # a ``Kind``, or a description of an unregistered write
    blob: str  # the blob name within its container ("" for container and queue writes)


def _blob_kind(method: str, query: dict[str, str], header: dict[str, str]) -> Kind | str:
    """The kind of a blob-service write: the first rule that holds, in order."""
    comp = query.get("comp")
    rules: list[tuple[bool, Kind | str]] = [
        (query.get("restype") == "container", Kind.CONTAINER if method == "PUT" else f"container {method}"),
        (method == "DELETE", Kind.DELETE),
        (method == "PUT" and comp == "appendblock", Kind.APPEND),
        (method != "PUT" or comp is not None, f"{method} comp={comp}"),
        (header.get("x-ms-blob-type") == "AppendBlob", Kind.APPEND_CREATE),
        (header.get("if-none-match") == "*", Kind.CREATE),
        (bool(header.get("if-match")), Kind.REPLACE),
    ]
    return next((kind for holds, kind in rules if holds), "unconditional PUT")


def _queue_kind(method: str, path: list[str], query: dict[str, str]) -> Kind | str:
    if method == "POST" and path[-1:] == ["messages"]:
        return Kind.SEND
    if method == "PUT" and len(path) == 1 and "comp" not in query:
        return Kind.QUEUE
    return f"queue {method} {query.get('comp', '')}"


def classify(service: str, method: str, url: str, headers: Any) -> Write | None:
    """The write a request makes, or None for a read."""
    if method in ("GET", "HEAD"):
        return None
    parts = urlsplit(url)
    path = [unquote(p) for p in parts.path.split("/") if p]
    if path and path[0] == "devstoreaccount1":  # Azurite's path-style account
        path = path[1:]
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    if service == "queue":
        kind = _queue_kind(method, path, query)
        return Write(service, method, kind, "" if isinstance(kind, Kind) else "/".join(path))
    header = {str(k).lower(): str(v) for k, v in headers.items()}
    kind = _blob_kind(method, query, header)
    return Write(service, method, kind, "" if kind is Kind.CONTAINER else "/".join(path[1:]))


def registered(write: Write) -> WriteSite | None:
    if not isinstance(write.kind, Kind):
        return None
    if write.kind in (Kind.SEND, Kind.QUEUE, Kind.CONTAINER):
        return next(site for site in SITES if site.kind is write.kind)
    return site_for(write.kind, write.blob)


@dataclass
class Armed:
    site: str
    fault: str
    rival: Callable[[], Awaitable[Any]] | None
    skip: int  # matching writes to let through first
    left: int  # attempts still to hit
    hits: list[Write] = field(default_factory=list)


class WriteFaults:
    """Sees every storage write of the clients built while installed; injects one fault."""

    def __init__(self) -> None:
        self.writes: list[Write] = []
        self.sites: Counter[str] = Counter()
        self.unregistered: list[Write] = []
        self.armed: Armed | None = None
        self._quiet = 0  # > 0 while a rival runs: its writes are seen, never faulted

    def arm(
        self,
        site: str,
        fault: str,
        *,
        rival: Callable[[], Awaitable[Any]] | None = None,
        skip: int = 0,
    ) -> Armed:
        assert fault in FAULTS, fault
        assert "rival" not in fault or rival is not None, "a rival fault needs the rival's action"
        self.armed = Armed(site, fault, rival, skip, ATTEMPTS if fault in ("lost", "outage") else 1)
        return self.armed

    def disarm(self) -> None:
        self.armed = None

    def transport(self, service: str) -> AsyncHttpTransport:
        return RelayTransport(self._send, service, AioHttpTransport())

    async def _send(self, service: str, inner: AsyncHttpTransport, request: Any, **kwargs: Any) -> Any:
        write = classify(service, request.method, request.url, request.headers)
        if write is None:
            return await inner.send(request, **kwargs)
        self.writes.append(write)
        site = registered(write)
        if site is None:
            self.unregistered.append(write)
        else:
            self.sites[site.name] += 1
        armed = self.armed
        if armed is None or site is None or site.name != armed.site or self._quiet or armed.left <= 0:
            return await inner.send(request, **kwargs)
        if armed.skip > 0 and not armed.hits:
            armed.skip -= 1
            return await inner.send(request, **kwargs)
        first = not armed.hits
        armed.hits.append(write)
        armed.left -= 1
        if armed.fault == "rival":
            await self._rival(armed)
            return await inner.send(request, **kwargs)
        if armed.fault == "outage" or not first:
            raise ServiceRequestError(f"injected: {site.name} unreachable (not sent)")
        await inner.send(request, **kwargs)  # it lands
        if armed.fault == "retry_rival":
            await self._rival(armed)
        raise ServiceResponseError(f"injected: {site.name} landed, its answer was lost")

    async def _rival(self, armed: Armed) -> None:
        assert armed.rival is not None
        self._quiet += 1
        try:
            await armed.rival()
        finally:
            self._quiet -= 1


@contextmanager
def installed(monkeypatch: pytest.MonkeyPatch) -> Iterator[WriteFaults]:
    """Every storage client built from now on sends through a ``WriteFaults``.

    Close the cached clients first (``clients.close_all``, ``run_queue.close_all``) so the
    ones the app uses are built with it.
    """
    faults = WriteFaults()
    with monkeypatch.context() as patch:
        patch.setattr(storage_client, "transport_hook", faults.transport)
        # The SDK still retries each failed attempt, at once: its backoff is a wait, not a
        # behaviour (as CALLBACK_RETRY_SCHEDULE=0 shortens the callbacks' schedule in tests).
        patch.setattr(BlobLinearRetry, "get_backoff_time", _no_backoff)
        patch.setattr(QueueLinearRetry, "get_backoff_time", _no_backoff)
        yield faults


def _no_backoff(self: Any, settings: dict[str, Any]) -> float:
    return 0.0


__all__ = ["ATTEMPTS", "FAULTS", "Armed", "Write", "WriteFaults", "classify", "installed", "registered"]
