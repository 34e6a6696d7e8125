"""What a checkpoint is, as callers see it: its status, and the metadata kept beside it.

Domain facts, not storage: ``checkpoint_status`` reads a ``WorkflowCheckpoint``;
``CheckpointInfo`` is what a store can report without reading a checkpoint's body.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agent_framework import WorkflowCheckpoint

# Where a checkpoint records the registry name and version of the workflow that wrote it,
# in its body's ``metadata`` and in its blob's metadata alike (``core/catalog.py``).
WORKFLOW_KEY = "workflow"
VERSION_KEY = "workflow_version"


@dataclass(frozen=True, slots=True)
class CheckpointInfo:
    """What a checkpoint's blob metadata says, without reading its body."""

    checkpoint_id: str
    workflow_name: str
    previous_checkpoint_id: str | None
    timestamp: str
    status: str
    pending_request_ids: tuple[str, ...]
    size_bytes: int
    thread_id: str | None = None
    # A fork's checkpoint names the head it replaced, so that head stays reachable (the sweep
    # walks this link as it walks ``previous_checkpoint_id``).
    replaced_head_id: str | None = None
    # When the blob was created, by the storage service's clock (epoch seconds, whole
    # seconds; None: not reported). ``timestamp`` is the writer's own clock.
    stored_at: float | None = None
    # The registry name and version that wrote it; None: written before versions existed.
    workflow: str | None = None
    workflow_version: str | None = None

    @property
    def links(self) -> tuple[str, ...]:
        """The checkpoints this one keeps reachable: its parent and, for a fork, the old head."""
        return tuple(link for link in (self.previous_checkpoint_id, self.replaced_head_id) if link)

    @property
    def created_epoch(self) -> float:
        try:
            return datetime.fromisoformat(self.timestamp).timestamp()
        except ValueError:
            return 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "checkpoint_id": self.checkpoint_id,
            "previous_checkpoint_id": self.previous_checkpoint_id,
            "workflow_name": self.workflow_name,
            "timestamp": self.timestamp,
            "status": self.status,
            "pending_request_ids": list(self.pending_request_ids),
            "size_bytes": self.size_bytes,
            "thread_id": self.thread_id,
            "replaced_head_id": self.replaced_head_id,
            "workflow": self.workflow,
            "workflow_version": self.workflow_version,
        }


def checkpoint_status(checkpoint: WorkflowCheckpoint) -> str:
    """``idle``, ``pending_requests`` or ``in_flight`` (taken mid-run)."""
    if any(checkpoint.messages.values()):
        return "in_flight"
    if checkpoint.pending_request_info_events:
        return "pending_requests"
    return "idle"
