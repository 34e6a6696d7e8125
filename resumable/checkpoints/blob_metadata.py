"""A checkpoint blob's metadata: what it records beside the body, and what it reads back as.

Metadata travels as HTTP headers, so listing a container reports it without reading any
body, and a download returns it with the body. That is what lets the workflow and version
that wrote a checkpoint choose the codec (allowlist) that decodes it at no extra storage
operation (``core/catalog.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any
from urllib.parse import quote, unquote

from agent_framework import WorkflowCheckpoint

from ..base.errors import CheckpointIncompatible, CheckpointUnreadable
from ..storage import layout
from .codec import CheckpointCodec
from .info import VERSION_KEY, WORKFLOW_KEY, CheckpointInfo, checkpoint_status

logger = logging.getLogger(__name__)
BLOB_PREFIX = layout.CHECKPOINTS


def metadata_for(
    checkpoint: WorkflowCheckpoint, thread_id: str | None, replaced_head: str | None = None
) -> dict[str, str]:
    # Metadata travels as HTTP headers: ASCII only, so free text is percent-encoded.
    # Empty values are left out (listings return them as None).
    recorded = checkpoint.metadata or {}
    metadata = {
        "workflow_name": quote(checkpoint.workflow_name, safe=""),
        # The registry name and version that wrote it (``core/catalog.py``): read with the
        # body, they choose the allowlist that decodes it, at no extra storage operation.
        WORKFLOW_KEY: quote(str(recorded.get(WORKFLOW_KEY) or ""), safe=""),
        VERSION_KEY: quote(str(recorded.get(VERSION_KEY) or ""), safe=""),
        "timestamp": checkpoint.timestamp,
        "previous_checkpoint_id": checkpoint.previous_checkpoint_id or "",
        "status": checkpoint_status(checkpoint),
        "pending_request_ids": ",".join(checkpoint.pending_request_info_events)[:2048],
        "thread_id": thread_id or "",
        "replaced_head_id": replaced_head or "",
    }
    return {key: value for key, value in metadata.items() if value}


def workflow_of(metadata: Mapping[str, str | None]) -> dict[str, str]:
    """The workflow and version a blob's metadata names (what chooses the codec that decodes it)."""
    return {key: unquote(metadata.get(key) or "") for key in (WORKFLOW_KEY, VERSION_KEY) if metadata.get(key)}


def info_from(
    name: str, raw_metadata: dict[str, str | None], size: int, created: datetime | None = None
) -> CheckpointInfo:
    metadata = {key: value or "" for key, value in raw_metadata.items()}
    pending = metadata.get("pending_request_ids", "")
    return CheckpointInfo(
        checkpoint_id=name.removeprefix(BLOB_PREFIX).removesuffix(".json"),
        workflow_name=unquote(metadata.get("workflow_name", "")),
        previous_checkpoint_id=metadata.get("previous_checkpoint_id") or None,
        timestamp=metadata.get("timestamp", ""),
        status=metadata.get("status", ""),
        pending_request_ids=tuple(p for p in pending.split(",") if p),
        size_bytes=size,
        thread_id=metadata.get("thread_id") or None,
        replaced_head_id=metadata.get("replaced_head_id") or None,
        workflow=unquote(metadata.get(WORKFLOW_KEY, "")) or None,
        workflow_version=unquote(metadata.get(VERSION_KEY, "")) or None,
        stored_at=created.timestamp() if created is not None else None,
    )


def of_blob(blob: Any) -> CheckpointInfo:
    """A listing entry's ``CheckpointInfo`` (a ``BlobProperties``)."""
    return info_from(blob.name, dict(blob.metadata or {}), int(blob.size or 0), blob.creation_time)


# Which codec reads a checkpoint, from the metadata stored beside it (``core/catalog.py``).
CodecFor = Callable[[Mapping[str, str]], CheckpointCodec]


def codec_of(metadata: Mapping[str, str], codec: CheckpointCodec, codec_for: CodecFor | None) -> CheckpointCodec:
    """The codec that writes (or reads) a checkpoint with this metadata: its own workflow
    version's, or ``codec`` for a store given no ``codec_for``."""
    return codec if codec_for is None else codec_for(workflow_of(metadata))


def decode_checked(
    data: bytes, metadata: Mapping[str, str], checkpoint_id: str, codec: CheckpointCodec, codec_for: CodecFor | None
) -> WorkflowCheckpoint:
    """Decode with the codec the metadata chooses, then (with ``codec_for``) refuse a body
    whose own workflow version would have chosen another (``same_workflow``)."""
    chosen = codec_of(metadata, codec, codec_for)
    checkpoint = chosen.decode(data, expected_id=checkpoint_id)
    return checkpoint if codec_for is None else same_workflow(checkpoint, chosen, codec_for)


def same_workflow(
    checkpoint: WorkflowCheckpoint,
    decoded_by: CheckpointCodec,
    codec_for: CodecFor,
) -> WorkflowCheckpoint:
    """Refuse a body that its own workflow version's codec did not decode. The blob's metadata
    (not signed) chose ``decoded_by``; the body (signed, with the MAC on) names its workflow
    and version, or neither when written before versions (the default workflow's ``v1``, as
    a blob without them). The catalog keeps one codec per version: another object is another
    version's allowlist, so edited metadata never reads a body under a wider one."""
    named = {key: str(value) for key in (WORKFLOW_KEY, VERSION_KEY) if (value := checkpoint.metadata.get(key))}
    try:
        own = codec_for(named)
    except CheckpointIncompatible:
        own = None
    if own is not decoded_by:
        logger.warning(
            "Checkpoint %s refused: its blob's metadata names another workflow version", checkpoint.checkpoint_id
        )
        raise CheckpointUnreadable("The checkpoint's metadata does not match its content.")
    return checkpoint
