"""A ``CheckpointStore`` in one process's memory: what a new store implements, at its smallest.

It keeps what Blob Storage would: the encoded bytes and the metadata beside them, never
the live checkpoint object. So a save runs through the same ``CheckpointCodec`` (the size
cap, and the proof that the allowlist reads it back), a load decodes again (a caller's
later edits to what it saved or loaded never reach the store), and ``get_info`` answers
from the metadata alone, as a blob listing does. Errors and paging match
``BlobCheckpointStorage``: both run ``tests/library/test_checkpoint_store_contract.py``.

What it leaves out: a MAC (nothing outside the process can write here), a warm cache
(``head_of`` changes nothing: every load reads "storage"), and durability. For tests,
local tools, and as the template for a Cosmos DB or file store.
"""

from __future__ import annotations

import asyncio
import bisect
import dataclasses
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from agent_framework import WorkflowCheckpoint

from ..base.errors import CheckpointConflict, CheckpointNotFound
from ..base.ids import validate_id
from . import blob_metadata
from .blob_metadata import CodecFor
from .codec import CheckpointCodec
from .info import CheckpointInfo


@dataclass(frozen=True, slots=True)
class StoredCheckpoint:
    """One checkpoint as stored: its encoded body, its metadata, when it was stored."""

    data: bytes
    metadata: dict[str, str]
    stored_at: float


def _name(checkpoint_id: str) -> str:
    """Its key, ordered as Blob Storage orders ``checkpoints/<id>.json`` (``info_page``)."""
    return f"{validate_id(checkpoint_id)}.json"


class MemoryCheckpointStore:
    """Create-only checkpoints in a dict of encoded bytes.

    ``shared``: another store's ``contents``, so two stores (say, with different codecs, or
    standing for two app instances) read and write one set of checkpoints, as two instances
    share one container. ``codec_for``: as for ``BlobCheckpointStorage``.
    """

    def __init__(
        self,
        codec: CheckpointCodec | None = None,
        *,
        codec_for: CodecFor | None = None,
        shared: dict[str, StoredCheckpoint] | None = None,
    ) -> None:
        self.codec = codec or CheckpointCodec()
        self.codec_for = codec_for
        self.contents: dict[str, StoredCheckpoint] = {} if shared is None else shared

    async def save(
        self, checkpoint: WorkflowCheckpoint, *, thread_id: str | None = None, replaced_head: str | None = None
    ) -> str:
        name = _name(checkpoint.checkpoint_id)
        metadata = blob_metadata.metadata_for(checkpoint, thread_id, replaced_head)
        data = blob_metadata.codec_of(metadata, self.codec, self.codec_for).encode(checkpoint)
        # The check and the insert below run with no await between them: create-only, as an
        # ``If-None-Match: *`` upload is.
        existing = self.contents.get(name)
        if existing is not None:
            if len(existing.data) == len(data) and existing.metadata.get("timestamp") == metadata["timestamp"]:
                return checkpoint.checkpoint_id  # the same save again (the Blob store's rule)
            raise CheckpointConflict(f"Checkpoint '{name}' already exists and was not overwritten.")
        self.contents[name] = StoredCheckpoint(data, metadata, time.time())
        await asyncio.sleep(0)  # a storage call yields to the loop; so does this one
        return checkpoint.checkpoint_id

    async def load(self, checkpoint_id: str, *, head_of: str | None = None) -> WorkflowCheckpoint:
        return (await self.load_described(checkpoint_id, head_of=head_of))[0]

    async def load_described(
        self, checkpoint_id: str, *, head_of: str | None = None
    ) -> tuple[WorkflowCheckpoint, CheckpointInfo]:
        stored = self._stored(checkpoint_id)
        await asyncio.sleep(0)
        checkpoint = blob_metadata.decode_checked(
            stored.data, stored.metadata, checkpoint_id, self.codec, self.codec_for
        )
        return checkpoint, _info(checkpoint_id, stored)

    async def delete(self, checkpoint_id: str) -> bool:
        await asyncio.sleep(0)
        return self.contents.pop(_name(checkpoint_id), None) is not None

    async def get_info(self, checkpoint_id: str) -> CheckpointInfo:
        stored = self._stored(checkpoint_id)
        await asyncio.sleep(0)
        return _info(checkpoint_id, stored)

    async def info_page(self, token: str | None, size: int) -> tuple[list[CheckpointInfo], str | None]:
        """Name order; the token is the last name of the page before (what a Blob marker is)."""
        await asyncio.sleep(0)
        names = sorted(self.contents)
        start = 0 if token is None else bisect.bisect_right(names, token)
        page = names[start : start + max(size, 1)]
        infos = [_info(name.removesuffix(".json"), self.contents[name]) for name in page]
        more = start + len(page) < len(names)
        return infos, page[-1] if more else None

    def _stored(self, checkpoint_id: str) -> StoredCheckpoint:
        stored = self.contents.get(_name(checkpoint_id))
        if stored is None:
            raise CheckpointNotFound(f"Checkpoint '{checkpoint_id}' was not found.")
        return stored


def _info(checkpoint_id: str, stored: StoredCheckpoint) -> CheckpointInfo:
    """What ``get_info`` reports: the metadata, the body's size, when it was stored."""
    created = datetime.fromtimestamp(stored.stored_at, UTC)
    info = blob_metadata.info_from(checkpoint_id, dict(stored.metadata), len(stored.data), created)
    return dataclasses.replace(info, checkpoint_id=checkpoint_id)  # ``info_from`` strips a ".json"
