"""Small JSON records in blobs, updated only by ETag compare-and-swap.

Thread pointers and idempotency records share these semantics: create only if
absent, replace only if unchanged since read, so two writers can never both win.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

from . import sdk
from .failures import download_capped, error_code, storage_unavailable_on_failure, upload_new

if TYPE_CHECKING:  # the storage SDK loads on first use, not at import (cold start)
    from azure.storage.blob.aio import ContainerClient

# Records are written only by this app. Idempotency records hold a whole response body
# (base64, so 4/3 of it), and a response is bounded by the request and checkpoint
# limits; this cap is far above both and only guards against a blob that is not ours.
MAX_RECORD_BYTES = 64 * 1024 * 1024


class RecordConflict(Exception):
    """Someone else created or changed the record first."""


class RecordUnreadable(Exception):
    """A record exists but is not a JSON object this app wrote (corrupt, foreign or over the cap).

    Never read as "no record": each store decides what an unreadable record means,
    and none of them may treat it as absent.
    """


@dataclass(frozen=True, slots=True)
class Record:
    """A record as read or written. ``modified`` is its Last-Modified and ``seen`` the
    response's Date: both the storage service's clock (epoch seconds, whole seconds), so
    two instances can compare ages without trusting each other's clocks."""

    data: dict[str, Any]
    etag: str
    modified: float | None = None
    seen: float | None = None


def _epoch(value: Any) -> float | None:
    """A datetime, or an HTTP date string, as epoch seconds (None if absent or unparsable)."""
    if isinstance(value, str):
        try:
            value = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
    return value.timestamp() if isinstance(value, datetime) else None


def _written(data: dict[str, Any], result: dict[str, Any]) -> Record:
    return Record(data, str(result["etag"]), _epoch(result.get("last_modified")), _epoch(result.get("date")))


def _is_conflict(exc: sdk.HttpResponseError) -> bool:
    return exc.status_code in (409, 412) or error_code(exc) in ("BlobAlreadyExists", "ConditionNotMet")


class BlobRecords:
    """JSON records under one name prefix of a container."""

    def __init__(self, container: ContainerClient, prefix: str) -> None:
        self._container = container
        self._prefix = prefix

    def _blob_name(self, name: str) -> str:
        return f"{self._prefix}{name}.json"

    def _blob(self, name: str) -> Any:
        return self._container.get_blob_client(self._blob_name(name))

    async def get(self, name: str) -> Record | None:
        """The record, None if there is none; ``RecordUnreadable`` if it is not ours to read."""
        dates: list[str] = []

        def note_date(response: Any) -> None:
            dates.append(response.http_response.headers.get("Date", ""))

        try:
            raw, properties = await download_capped(self._blob(name), MAX_RECORD_BYTES + 1, raw_response_hook=note_date)
        except sdk.ResourceNotFoundError:
            return None
        if len(raw) > MAX_RECORD_BYTES:
            raise RecordUnreadable(f"{self._blob_name(name)} is over {MAX_RECORD_BYTES} bytes")
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise RecordUnreadable(f"{self._blob_name(name)} is not JSON") from exc
        if not isinstance(data, dict):
            raise RecordUnreadable(f"{self._blob_name(name)} is not a JSON object")
        return Record(
            data, str(properties.etag), _epoch(properties.last_modified), _epoch(dates[-1] if dates else None)
        )

    async def create(self, name: str, data: dict[str, Any]) -> Record:
        """Create the record; ``RecordConflict`` if it already exists."""
        body = json.dumps(data, separators=(",", ":")).encode()
        try:
            result = await upload_new(self._container, self._blob_name(name), body)
        except sdk.HttpResponseError as exc:  # ResourceExistsError included
            if _is_conflict(exc):
                raise RecordConflict(name) from exc
            raise
        return _written(data, result)

    async def replace(self, name: str, data: dict[str, Any], etag: str) -> Record:
        """Overwrite the record if it still has ``etag``; ``RecordConflict`` otherwise."""
        body = json.dumps(data, separators=(",", ":")).encode()
        try:
            with storage_unavailable_on_failure("replace record"):
                result = await self._blob(name).upload_blob(
                    body, overwrite=True, etag=etag, match_condition=sdk.MatchConditions.IfNotModified
                )
        except (sdk.ResourceNotFoundError, sdk.ResourceExistsError) as exc:
            raise RecordConflict(name) from exc
        except sdk.HttpResponseError as exc:
            if _is_conflict(exc):
                raise RecordConflict(name) from exc
            raise
        return _written(data, result)

    async def delete(self, name: str, etag: str | None = None) -> bool:
        """Delete the record (only if unchanged, when ``etag`` is given)."""
        kwargs: dict[str, Any] = {}
        if etag is not None:
            kwargs = {"etag": etag, "match_condition": sdk.MatchConditions.IfNotModified}
        with storage_unavailable_on_failure("delete record"):
            try:
                await self._blob(name).delete_blob(**kwargs)
            except sdk.ResourceNotFoundError:
                return False
            except sdk.HttpResponseError as exc:
                if _is_conflict(exc):
                    return False
                raise
        return True

    async def names(self) -> list[str]:
        """Every record name under the prefix (a listing, no downloads)."""
        found: list[str] = []
        with storage_unavailable_on_failure("list records"):
            try:
                async for blob in self._container.list_blobs(name_starts_with=self._prefix):
                    found.append(blob.name.removeprefix(self._prefix).removesuffix(".json"))
            except sdk.ResourceNotFoundError:
                return []
        return found
