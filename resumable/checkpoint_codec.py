"""Checkpoint <-> bytes, with the framework's encoding and a restricted decoder.

A checkpoint blob is JSON in which non-JSON values are pickles, so whoever can write
the blob can run code in the decoder. This module is the one place bytes from storage
become objects, and it always decodes with the restricted unpickler: the framework
treats ``allowed_types=None`` as "no restriction", so an allowlist (possibly empty)
is always passed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from agent_framework import WorkflowCheckpoint

from .af_internals import decode_checkpoint_value, encode_checkpoint_value
from .errors import CheckpointTooLarge, CheckpointUnreadable

DEFAULT_MAX_CHECKPOINT_BYTES = 4 * 1024 * 1024

# The fields the framework's dataclass declares, with the JSON type each must decode
# to. A blob with an unknown field, a required one missing, or a wrong type is
# unreadable rather than a half-valid checkpoint that fails later inside the run.
# Optional fields may be missing, so blobs written before a framework upgrade added
# a field (with a default) still load.
_FIELD_TYPES: dict[str, type | tuple[type, ...]] = {
    "workflow_name": str,
    "graph_signature_hash": str,
    "checkpoint_id": str,
    "previous_checkpoint_id": (str, type(None)),
    "timestamp": str,
    "messages": dict,
    "state": dict,
    "pending_request_info_events": dict,
    "iteration_count": int,
    "metadata": dict,
    "version": str,
}
_REQUIRED_FIELDS = frozenset({"workflow_name", "graph_signature_hash", "checkpoint_id"})


class CheckpointCodec:
    """Encodes and decodes checkpoints under one allowlist and one size cap."""

    def __init__(
        self,
        *,
        allowed_types: Iterable[str] = (),
        max_bytes: int = DEFAULT_MAX_CHECKPOINT_BYTES,
    ) -> None:
        self.allowed_types: frozenset[str] = frozenset(allowed_types)
        self.max_bytes = max_bytes

    def encode(self, checkpoint: WorkflowCheckpoint) -> bytes:
        """Serialize with the framework's own encoding; refuse what could not be read back."""
        try:
            encoded = encode_checkpoint_value(checkpoint.to_dict())
            data = json.dumps(encoded, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        except Exception as exc:  # pickling failures surface as many types
            raise CheckpointUnreadable("The workflow state could not be encoded as a checkpoint.") from exc
        if len(data) > self.max_bytes:
            raise CheckpointTooLarge(
                f"The resulting checkpoint is {len(data)} bytes, over the {self.max_bytes}-byte limit; "
                "nothing was saved.",
                details={"size_bytes": len(data), "max_bytes": self.max_bytes},
            )
        return data

    def decode(self, data: bytes, *, expected_id: str | None = None) -> WorkflowCheckpoint:
        """Parse bytes from storage into a checkpoint, allowing only allowlisted types."""
        if len(data) > self.max_bytes:
            raise CheckpointUnreadable(
                f"The checkpoint is over the {self.max_bytes}-byte limit and was not read.",
                details={"max_bytes": self.max_bytes},
            )
        try:
            raw: Any = json.loads(data.decode("utf-8"))
        except (ValueError, RecursionError) as exc:  # includes bad UTF-8 and over-long integers
            raise CheckpointUnreadable("The checkpoint is not valid UTF-8 JSON.") from exc
        if not isinstance(raw, dict) or not set(raw) >= _REQUIRED_FIELDS or not set(raw) <= set(_FIELD_TYPES):
            raise CheckpointUnreadable("The checkpoint does not have the fields of a workflow checkpoint.")
        for name, value in raw.items():
            expected = _FIELD_TYPES[name]
            if not isinstance(value, expected) or (isinstance(value, bool) and expected is int):
                raise CheckpointUnreadable(f"The checkpoint field '{name}' has the wrong type.")
        try:
            decoded = decode_checkpoint_value(raw, allowed_types=self.allowed_types)
            checkpoint = WorkflowCheckpoint.from_dict(decoded)
        except Exception as exc:  # the restricted unpickler raises several types
            raise CheckpointUnreadable(
                "The checkpoint holds data that does not decode, or a type that is not on the allowlist."
            ) from exc
        if expected_id is not None and checkpoint.checkpoint_id != expected_id:
            raise CheckpointUnreadable("The checkpoint's ID does not match the blob it was read from.")
        return checkpoint
