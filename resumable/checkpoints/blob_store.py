"""Agent Framework ``CheckpointStorage`` on Azure Blob Storage.

Layout: one immutable blob per checkpoint, ``checkpoints/<checkpoint_id>.json``, in
the framework's own JSON encoding. Blob metadata carries what lookups need (workflow
name, timestamp, lineage, status), so listing by workflow reads blob listings, not
blob bodies.

Encoding a checkpoint and decoding a large one are CPU work proportional to its size, so
they run on a worker thread (a decode below ``OFF_LOOP_BYTES`` stays inline: the hop would
cost more than the work; an encode's size is unknown until it is done), and a worker runs a
bounded number of transfers at once (``transfers.py``): the event loop keeps serving other
requests (and ``/api/health``) meanwhile.
With ``CHECKPOINT_MAC_KEYS`` set, each blob carries an HMAC in its metadata, checked
before the body is parsed (``checkpoint_mac.py``).
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agent_framework import WorkflowCheckpoint
from agent_framework.exceptions import WorkflowCheckpointException

from ..base import tracing
from ..base.errors import CheckpointConflict, CheckpointNotFound, CheckpointUnreadable
from ..base.ids import validate_id
from ..storage import layout, sdk
from ..storage.failures import (
    create_container_if_missing,
    download_capped,
    list_page,
    storage_unavailable_on_failure,
    upload_new,
)
from . import blob_metadata
from .blob_metadata import CodecFor
from .cache import CachedBlob, CheckpointCache
from .codec import CheckpointCodec
from .info import CheckpointInfo
from .mac import CheckpointMac, MacMismatch
from .transfers import cpu, off_loop, transfer_slot

if TYPE_CHECKING:  # the storage SDK loads on first use, not at import (cold start)
    from azure.storage.blob.aio import ContainerClient

logger = logging.getLogger(__name__)

BLOB_PREFIX = layout.CHECKPOINTS
_CONTENT_TYPE = "application/json"


class BlobCheckpointNotFound(CheckpointNotFound, WorkflowCheckpointException):
    """Raised by ``load``; also a ``WorkflowCheckpointException`` as the protocol requires."""


def blob_name(checkpoint_id: str) -> str:
    return f"{BLOB_PREFIX}{validate_id(checkpoint_id)}.json"


class BlobCheckpointStorage:
    """Immutable, create-only checkpoint storage in one blob container.

    The library's ``CheckpointStore`` (``store.py``: what core, deletion and the sweeps
    use). It also implements the framework's ``CheckpointStorage`` protocol, so it can be
    handed to ``workflow.run(checkpoint_storage=...)`` for the upstream two-step
    pattern. The atomic resume does not do that: it loads and saves through this
    class itself, so that a failed save is an error rather than a logged warning.
    """

    def __init__(
        self,
        container: ContainerClient,
        codec: CheckpointCodec,
        mac: CheckpointMac | None = None,
        cache: CheckpointCache | None = None,
        *,
        codec_for: CodecFor | None = None,
    ) -> None:
        """``codec_for``: which codec (allowlist) reads and writes a blob, from its metadata
        (each workflow version has its own: ``core/catalog.py``); None: ``codec`` for every blob."""
        self.container = container
        self.codec = codec
        self.mac = mac or CheckpointMac(())
        # Recently written or read blobs, this process's (``checkpoint_cache.py`` says when
        # it may answer); None: every load downloads.
        self.cache = cache
        self._scope = container.url
        self.codec_for = codec_for

    # -- writes -------------------------------------------------------------------

    async def save(
        self, checkpoint: WorkflowCheckpoint, *, thread_id: str | None = None, replaced_head: str | None = None
    ) -> str:
        """Upload a new checkpoint blob; an existing one is never overwritten.

        ``thread_id`` tags checkpoints written by thread turns, for orphan sweeping;
        ``replaced_head`` is the head a fork moves away from, which this blob keeps reachable.
        """
        name = blob_name(checkpoint.checkpoint_id)
        with tracing.phase(
            "checkpoint.save",
            {
                "checkpoint.id": checkpoint.checkpoint_id,
                "checkpoint.previous_id": checkpoint.previous_checkpoint_id,
                "thread.id": thread_id,
            },
        ) as span:
            async with transfer_slot():
                watch = tracing.Stopwatch()
                described = blob_metadata.metadata_for(checkpoint, thread_id, replaced_head)
                codec = blob_metadata.codec_of(described, self.codec, self.codec_for)
                data, tag = await off_loop(self._encode_and_sign, checkpoint, codec)
                span.set_attribute("checkpoint.encode_ms", watch.ms)
                span.set_attribute("checkpoint.size_bytes", len(data))
                metadata = {**described, **tag}
                await self._upload_create_only(name, data, metadata)
            self._remember(checkpoint.checkpoint_id, data, metadata, thread_id, time.time())
        logger.info(
            "checkpoint saved",
            extra={
                "checkpoint_id": checkpoint.checkpoint_id,
                "previous_checkpoint_id": checkpoint.previous_checkpoint_id,
                "thread_id": thread_id,
                "request_id": tracing.request_id(),
                "size_bytes": len(data),
            },
        )
        return checkpoint.checkpoint_id

    def _encode_and_sign(self, checkpoint: WorkflowCheckpoint, codec: CheckpointCodec) -> tuple[bytes, dict[str, str]]:
        data = codec.encode(checkpoint)
        return data, self.mac.sign(data)

    async def _upload_create_only(self, name: str, data: bytes, metadata: dict[str, str]) -> None:
        try:
            await upload_new(self.container, name, data, metadata=metadata, content_type=_CONTENT_TYPE)
        except sdk.ResourceExistsError as exc:
            if not await self._is_same_upload(name, data, metadata):
                raise CheckpointConflict(f"Checkpoint '{name}' already exists and was not overwritten.") from exc

    async def _is_same_upload(self, name: str, data: bytes, metadata: dict[str, str]) -> bool:
        """Whether an existing blob is this very upload, landed by an attempt whose answer
        was lost (the SDK then retries and meets its own blob). Same size and timestamp
        on a random checkpoint ID: it is ours, and the save succeeded."""
        with storage_unavailable_on_failure("save"):
            props = await self.container.get_blob_client(name).get_blob_properties()
        existing = props.metadata or {}
        return int(props.size or 0) == len(data) and existing.get("timestamp") == metadata["timestamp"]

    async def ensure_container(self) -> None:
        """Create the container if it is missing."""
        await create_container_if_missing(self.container)

    async def delete(self, checkpoint_id: str) -> bool:
        """Forget it in the cache first, so this instance never answers for it again."""
        if self.cache is not None:
            self.cache.forget(self._scope, checkpoint_id)
        with storage_unavailable_on_failure("delete"):
            try:
                await self.container.delete_blob(blob_name(checkpoint_id))
            except sdk.ResourceNotFoundError:
                return False
        return True

    # -- reads --------------------------------------------------------------------

    async def load(self, checkpoint_id: str, *, head_of: str | None = None) -> WorkflowCheckpoint:
        """Download and decode one checkpoint: one GET, capped at the codec's size limit.

        Or none, when the cache holds it and may answer: by ID for a checkpoint of no
        thread, or (``head_of``) as the head of that thread, for a turn that commits by a
        compare-and-swap on the pointer that named it. Either way it is verified and decoded.
        """
        return (await self.load_described(checkpoint_id, head_of=head_of))[0]

    async def load_described(
        self, checkpoint_id: str, *, head_of: str | None = None
    ) -> tuple[WorkflowCheckpoint, CheckpointInfo]:
        """``load``, and the blob's metadata that the same GET (or the cache) carried: a
        history page with each turn costs what one without them does."""
        name = blob_name(checkpoint_id)
        with tracing.phase("checkpoint.load", {"checkpoint.id": checkpoint_id}) as span:
            cached = None if self.cache is None else self.cache.find(self._scope, checkpoint_id, head_of=head_of)
            span.set_attribute("checkpoint.cached", cached is not None)
            if cached is not None:
                async with transfer_slot():  # no transfer, but the same decode and memory to bound
                    checkpoint = await self._decode(span, checkpoint_id, cached.data, cached.metadata)
                created = datetime.fromtimestamp(cached.created, UTC) if cached.created else None
                return checkpoint, blob_metadata.info_from(name, dict(cached.metadata), len(cached.data), created)
            async with transfer_slot():
                try:
                    data, props = await download_capped(self.container.get_blob_client(name), self.codec.max_bytes + 1)
                except sdk.ResourceNotFoundError as exc:
                    raise BlobCheckpointNotFound(f"Checkpoint '{checkpoint_id}' was not found.") from exc
                metadata = dict(props.metadata or {})
                checkpoint = await self._decode(span, checkpoint_id, data, metadata)
            created = props.creation_time.timestamp() if props.creation_time else 0.0
            self._remember(checkpoint_id, data, metadata, metadata.get("thread_id") or None, created)
            return checkpoint, blob_metadata.info_from(name, metadata, len(data), props.creation_time)

    async def _decode(self, span: Any, checkpoint_id: str, data: bytes, metadata: dict[str, str]) -> WorkflowCheckpoint:
        span.set_attribute("checkpoint.size_bytes", len(data))
        watch = tracing.Stopwatch()
        checkpoint = await cpu(len(data), self._verify_and_decode, data, metadata, checkpoint_id)
        span.set_attribute("checkpoint.decode_ms", watch.ms)
        return checkpoint

    def _remember(
        self, checkpoint_id: str, data: bytes, metadata: dict[str, str], thread: str | None, at: float
    ) -> None:
        """Keep a blob just written or read (only once storage confirmed it)."""
        if self.cache is not None:
            self.cache.put(self._scope, checkpoint_id, CachedBlob(data, metadata, thread, at, time.monotonic()))

    def _verify_and_decode(self, data: bytes, metadata: dict[str, str], checkpoint_id: str) -> WorkflowCheckpoint:
        """The MAC first: a blob this app did not write is refused before it is parsed."""
        try:
            self.mac.verify(data, metadata)
        except MacMismatch as exc:
            logger.warning("Checkpoint %s refused: %s", checkpoint_id, exc)
            raise CheckpointUnreadable(
                "The checkpoint was not written by this app (its MAC does not verify)."
            ) from None
        return blob_metadata.decode_checked(data, metadata, checkpoint_id, self.codec, self.codec_for)

    async def get_info(self, checkpoint_id: str) -> CheckpointInfo:
        """Read a checkpoint's metadata without downloading or decoding its body."""
        name = blob_name(checkpoint_id)
        with storage_unavailable_on_failure("get properties"):
            try:
                props = await self.container.get_blob_client(name).get_blob_properties()
            except sdk.ResourceNotFoundError as exc:
                raise BlobCheckpointNotFound(f"Checkpoint '{checkpoint_id}' was not found.") from exc
        return blob_metadata.info_from(name, dict(props.metadata or {}), int(props.size or 0), props.creation_time)

    async def list_all_infos(self) -> list[CheckpointInfo]:
        """Every checkpoint's metadata, from the listing alone, oldest first."""
        infos: list[CheckpointInfo] = []
        with storage_unavailable_on_failure("list"):
            try:
                async for blob in self.container.list_blobs(name_starts_with=BLOB_PREFIX, include=["metadata"]):
                    infos.append(
                        blob_metadata.info_from(
                            blob.name, dict(blob.metadata or {}), int(blob.size or 0), blob.creation_time
                        )
                    )
            except sdk.ResourceNotFoundError:
                return []
        return sorted(infos, key=lambda info: info.timestamp)

    async def info_page(self, token: str | None, size: int) -> tuple[list[CheckpointInfo], str | None]:
        """One page of the listing (name order) from ``token``, and the next page's token."""
        blobs, token = await list_page(self.container, BLOB_PREFIX, token, size, metadata=True)
        infos = [
            blob_metadata.info_from(blob.name, dict(blob.metadata or {}), int(blob.size or 0), blob.creation_time)
            for blob in blobs
        ]
        return infos, token

    async def list_infos(self, *, workflow_name: str) -> list[CheckpointInfo]:
        """Checkpoints of one workflow, oldest first."""
        return [info for info in await self.list_all_infos() if info.workflow_name == workflow_name]

    async def list_checkpoint_ids(self, *, workflow_name: str) -> list[str]:
        return [info.checkpoint_id for info in await self.list_infos(workflow_name=workflow_name)]

    async def list_checkpoints(self, *, workflow_name: str) -> list[WorkflowCheckpoint]:
        return [await self.load(cid) for cid in await self.list_checkpoint_ids(workflow_name=workflow_name)]

    async def get_latest(self, *, workflow_name: str) -> WorkflowCheckpoint | None:
        """The newest checkpoint by timestamp (the writer's clock). Two can tie; then, as the
        framework's own storages do from 1.26, a tied one that another names as its parent is
        superseded, and among the rest the highest ID wins: the same answer whatever the
        listing order. Nothing in this library calls it (threads follow their head pointer);
        the framework's two-step pattern may."""
        infos = await self.list_infos(workflow_name=workflow_name)
        if not infos:
            return None
        tied = [info for info in infos if info.timestamp == infos[-1].timestamp]
        parents = {info.previous_checkpoint_id for info in tied}
        leaves = [info for info in tied if info.checkpoint_id not in parents] or tied
        return await self.load(max(leaves, key=lambda info: info.checkpoint_id).checkpoint_id)
