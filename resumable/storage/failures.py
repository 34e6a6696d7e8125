"""Translation of Azure SDK failures into the errors a caller is shown."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
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
        logger.warning("Blob %s failed: %s", operation, type(exc).__name__)
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
