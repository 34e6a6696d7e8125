"""Translation of Azure SDK failures into the errors a caller is shown, and the one rule for
whether a failed request can have reached storage.

Every failure is an outage to the caller (``StorageUnavailable``: 503, retry later) or a
misconfiguration; what differs is whether a *write* that failed may still have landed. A
request that was never sent (the connection was refused, the name did not resolve, the TLS
handshake failed, the connection timed out) changed nothing; one that went out and lost its
answer (a read timeout, a connection reset or closed after the request) may have. The SDK's
retry policy sends each request up to three times, so a call changed nothing only if none of
its attempts reached storage: ``watching_writes`` counts a block's write attempts and those
known unsent (``never_sent``), as every client's request hook and retry policy report them.
The turn pipeline asks it about its commit (``core/runs.py``): a commit none of whose writes
reached storage is known not to have happened, an outage, not an unknown outcome.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..base.errors import ServerMisconfigured, StorageUnavailable
from . import sdk

if TYPE_CHECKING:  # the storage SDK loads on first use, not at import (cold start)
    from azure.storage.blob import BlobProperties
    from azure.storage.blob.aio import BlobClient, ContainerClient

logger = logging.getLogger(__name__)
# Statuses that are worth retrying: a timeout and throttling. Every other 4xx is a
# permanent answer about this app's requests (a refused credential, a missing role, an
# API version the service does not accept): retrying would fail the same way forever.
_TRANSIENT_4XX = frozenset({408, 429})


def error_code(exc: sdk.HttpResponseError) -> str:
    """The storage error code as a string (the SDK gives an enum in some paths)."""
    code = exc.error_code
    return str(getattr(code, "value", code) or "")


# Methods that change nothing: their attempts are not writes.
_READS = frozenset({"GET", "HEAD", "OPTIONS"})


def never_sent(error: BaseException) -> bool:
    """Whether a failed attempt is known not to have reached storage.

    azure-core's ``ServiceRequestError`` means "not sent", but its aiohttp transport also
    raises it for a connection closed or reset after the request went out, so the cause
    decides: a failure to connect (refused, DNS, TLS, connect timeout: aiohttp's
    ``ClientConnectorError`` and ``ConnectionTimeoutError``) was never sent; any other cause
    may have been. A ``ServiceRequestError`` with no cause (raised by a transport of ours,
    ``devtools.relay_transport``) is taken at its documented word. Everything else, a
    ``ServiceResponseError`` (a read timeout) or an answered request, was sent.
    """
    if not isinstance(error, sdk.ServiceRequestError):
        return False
    cause = error.inner_exception if error.inner_exception is not None else error.__cause__
    if cause is None:
        return True
    from aiohttp import client_exceptions as aiohttp_errors  # noqa: PLC0415 - loaded with the SDK's transport

    return isinstance(cause, (aiohttp_errors.ClientConnectorError, aiohttp_errors.ConnectionTimeoutError))


@dataclass
class WriteAttempts:
    """The write requests made inside ``watching_writes``, SDK retries included: how many
    left the client, and how many of those are known never to have reached storage."""

    made: int = 0
    unsent: int = 0

    @property
    def none_reached_storage(self) -> bool:
        """Nothing written inside the block can have landed."""
        return self.unsent >= self.made


_watching: ContextVar[tuple[WriteAttempts, ...]] = ContextVar("storage_write_attempts", default=())


@contextmanager
def watching_writes() -> Iterator[WriteAttempts]:
    """Count the write attempts made inside this block (and by tasks it starts)."""
    attempts = WriteAttempts()
    token = _watching.set((*_watching.get(), attempts))
    try:
        yield attempts
    finally:
        _watching.reset(token)


def _is_write(request: Any) -> bool:
    method = getattr(getattr(request, "http_request", request), "method", None)
    return method not in _READS


def attempt_made(request: Any) -> None:
    """Every client's request hook, once per attempt, before it is sent."""
    watching = _watching.get()
    if watching and _is_write(request):
        for attempts in watching:
            attempts.made += 1


def attempt_failed(request: Any, error: BaseException) -> None:
    """Every client's retry policy, once per failed attempt (the last one too)."""
    watching = _watching.get()
    if watching and _is_write(request) and never_sent(error):
        for attempts in watching:
            attempts.unsent += 1


@contextmanager
def storage_unavailable_on_failure(operation: str) -> Iterator[None]:
    """Map storage failures to what a caller should do about them.

    Transport failures, timeouts, throttling and 5xx are ``StorageUnavailable`` (503,
    retry later). A 401, 403 or other permanent 4xx is ``ServerMisconfigured`` (500, no
    Retry-After): the app's credential, role or settings are wrong, and a retry cannot
    help. ``ResourceNotFoundError``, create-only conflicts (409/412) and a range past the
    end of a blob (416) pass through: callers give them their own meaning. Details are
    logged here and never shown to the caller.
    """
    try:
        yield
    except sdk.ResourceNotFoundError:
        raise
    except sdk.HttpResponseError as exc:
        status = exc.status_code or 0
        if status in (409, 412, 416):
            raise
        if 400 <= status < 500 and status not in _TRANSIENT_4XX:
            logger.error(
                "Blob %s was refused: HTTP %s %s (check the storage credential, its role and the settings)",
                operation,
                status,
                error_code(exc),
            )
            raise ServerMisconfigured() from exc
        logger.warning("Blob %s failed: HTTP %s %s", operation, status, error_code(exc))
        raise StorageUnavailable(f"Checkpoint storage failed during {operation}.") from exc
    except (TimeoutError, sdk.AzureError, OSError) as exc:
        sent = "never sent" if never_sent(exc) else "sent, answer lost"
        logger.warning("Blob %s failed: %s (%s)", operation, type(exc).__name__, sent)
        raise StorageUnavailable(f"Checkpoint storage could not be reached during {operation}.") from exc


async def create_container_if_missing(container: ContainerClient) -> None:
    """Create the container on first use; racing creators both succeed."""
    with storage_unavailable_on_failure("create container"):
        try:
            await container.create_container()
            logger.info("Created blob container %s", container.container_name)
        except sdk.ResourceExistsError:
            pass


async def download_capped(blob: BlobClient, limit: int, **options: Any) -> tuple[bytes, BlobProperties]:
    """Read a blob's first ``limit`` bytes, and its properties, in one GET.

    Callers ask for one byte more than they accept, so an oversized blob is refused
    without being read whole. A ranged read of an empty blob is a 416 from the
    service: that is an empty body, for the caller's parser to refuse, not an outage.
    ``ResourceNotFoundError`` passes through. ``options`` go to the SDK call (a response hook).
    """
    with storage_unavailable_on_failure("read"):
        try:
            downloader = await blob.download_blob(offset=0, length=limit, **options)
        except sdk.HttpResponseError as exc:
            if exc.status_code != 416:
                raise
            return b"", await blob.get_blob_properties()
        return await downloader.readall(), downloader.properties


async def list_page(
    container: ContainerClient, prefix: str, token: str | None, size: int, *, metadata: bool = False
) -> tuple[list[BlobProperties], str | None]:
    """One page (at most ``size`` blobs) of the listing under ``prefix``, starting where
    ``token`` says (None: the first page), and the token of the next page (None: the end).

    Work that cannot finish in one call keeps the token and goes on from it later, rather
    than listing everything again.
    """
    include = ["metadata"] if metadata else None
    with storage_unavailable_on_failure("list"):
        try:
            pages = container.list_blobs(name_starts_with=prefix, include=include, results_per_page=size).by_page(
                continuation_token=token
            )
            page = await anext(pages)
            blobs = [blob async for blob in page]
        except sdk.ResourceNotFoundError:
            return [], None
    return blobs, pages.continuation_token or None


async def upload_new(container: ContainerClient, name: str, data: bytes, **kwargs: Any) -> dict[str, Any]:
    """Create-only upload; creates a missing container once and retries.

    An existing blob raises ``ResourceExistsError`` (409): never an overwrite. Callers
    decide what a collision means. It goes on without the SDK's frames: azure-core raises
    it from a frame that holds it (``map_error``), a cycle that kept the caller's whole
    stack (a run's workflow and checkpoint) until the cycle collector ran.
    """
    blob = container.get_blob_client(name)
    for attempt in (1, 2):
        try:
            with storage_unavailable_on_failure("save"):
                return await blob.upload_blob(data, overwrite=False, **kwargs)
        except sdk.ResourceExistsError as exc:
            exc.__traceback__ = None
            raise
        except sdk.ResourceNotFoundError as exc:
            if attempt == 2 or error_code(exc) != "ContainerNotFound":
                raise
            await create_container_if_missing(container)
    raise AssertionError("unreachable")
