"""Translation of Azure SDK failures into the errors a caller is shown."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from azure.core.exceptions import AzureError, HttpResponseError, ResourceExistsError, ResourceNotFoundError
from azure.storage.blob.aio import ContainerClient

from .errors import StorageUnavailable

logger = logging.getLogger(__name__)


def error_code(exc: HttpResponseError) -> str:
    """The storage error code as a string (the SDK gives an enum in some paths)."""
    code = exc.error_code
    return str(getattr(code, "value", code) or "")


@contextmanager
def storage_unavailable_on_failure(operation: str) -> Iterator[None]:
    """Re-raise transport and server failures as ``StorageUnavailable`` (503).

    ``ResourceNotFoundError`` and create-only conflicts pass through: callers give
    them their own meaning. Everything else is logged here with its detail and shown
    to the caller without it.
    """
    try:
        yield
    except ResourceNotFoundError:
        raise
    except HttpResponseError as exc:
        if exc.status_code in (409, 412):
            raise
        logger.warning("Blob %s failed: HTTP %s %s", operation, exc.status_code, error_code(exc))
        raise StorageUnavailable(f"Checkpoint storage failed during {operation}.") from exc
    except (TimeoutError, AzureError, OSError) as exc:
        logger.warning("Blob %s failed: %s", operation, type(exc).__name__)
        raise StorageUnavailable(f"Checkpoint storage could not be reached during {operation}.") from exc


async def create_container_if_missing(container: ContainerClient) -> None:
    """Create the container on first use; racing creators both succeed."""
    with storage_unavailable_on_failure("create container"):
        try:
            await container.create_container()
            logger.info("Created blob container %s", container.container_name)
        except ResourceExistsError:
            pass


async def upload_new(container: ContainerClient, name: str, data: bytes, **kwargs: Any) -> dict[str, Any]:
    """Create-only upload; creates a missing container once and retries.

    An existing blob raises ``ResourceExistsError`` (409): never an overwrite. Callers
    decide what a collision means.
    """
    blob = container.get_blob_client(name)
    for attempt in (1, 2):
        try:
            with storage_unavailable_on_failure("save"):
                return await blob.upload_blob(data, overwrite=False, **kwargs)
        except ResourceNotFoundError as exc:
            if attempt == 2 or error_code(exc) != "ContainerNotFound":
                raise
            await create_container_if_missing(container)
    raise AssertionError("unreachable")
