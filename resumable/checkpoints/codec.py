"""Checkpoint <-> bytes: the framework's encoding, our own guarded decoder.

A checkpoint blob is JSON in which non-JSON values are pickles, so whoever can write
the blob could run code in the decoder. This module is the one place bytes from storage
become objects. It does not use the framework's decoder: 1.23.0's restricted unpickler
admits ``builtins:type``, which is enough to run code (``resumable/pickle_guard.py``).
Instead every pickle in a blob is scanned first, before any of them is unpickled, and
then loaded by an unpickler that enforces the same allowlist.

Saving runs the same decoder over what it is about to write, so a checkpoint that this
app could not read back is never written (a thread would be stuck on it for good).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from agent_framework import WorkflowCheckpoint, WorkflowEvent

from ..base.errors import CheckpointNotSaveable, CheckpointTooLarge, CheckpointUnreadable
from .af_internals import CHECKPOINT_DATA_TYPES, encode_checkpoint_value
from .pickle_guard import DEFAULT_LIMITS, Allowlist, PickleLimits, ScanBudget, UnsafePickle, restricted_loads, scan
from .pickle_machine import TypeNotAllowed

logger = logging.getLogger(__name__)

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
# The framework's pickle envelope: {"__pickled__": base64, "__type__": "module:qualname"}.
_PICKLED, _TYPE = "__pickled__", "__type__"
_ENVELOPE_KEYS = frozenset({_PICKLED, _TYPE})

FRAMEWORK_TYPE_KEYS: frozenset[str] = frozenset(f"{t.__module__}:{t.__qualname__}" for t in CHECKPOINT_DATA_TYPES)


class _Refused(Exception):
    """Why a checkpoint was refused; logged, never shown to callers."""

    def __init__(self, reason: str, public: str, type_key: str | None = None) -> None:
        super().__init__(reason)
        self.public = public
        self.type_key = type_key  # a class missing from the allowlist, when that is the reason


_NOT_DECODABLE = "The checkpoint holds data that does not decode, or a type that is not on the allowlist."


class CheckpointCodec:
    """Encodes and decodes checkpoints under one allowlist and one size cap.

    The allowlist is the framework's own checkpoint data types plus ``allowed_types``
    (the workflow's ``checkpoint_types`` and the ``CHECKPOINT_ALLOWED_TYPES`` setting).
    An entry that is not a plain data class raises ``UnsafeAllowlist``.
    """

    def __init__(
        self,
        *,
        allowed_types: Iterable[str] = (),
        max_bytes: int = DEFAULT_MAX_CHECKPOINT_BYTES,
        limits: PickleLimits = DEFAULT_LIMITS,
    ) -> None:
        self.allowed_types: frozenset[str] = frozenset(allowed_types)
        self.allowlist = Allowlist.of(FRAMEWORK_TYPE_KEYS | self.allowed_types)
        self.max_bytes = max_bytes
        self.limits = limits

    def encode(self, checkpoint: WorkflowCheckpoint) -> bytes:
        """Serialize with the framework's encoding, then prove it decodes.

        ``CheckpointNotSaveable`` (500) when the state cannot be encoded or would not
        decode under this codec's own rules: a workflow bug, and nothing is written.
        """
        try:
            encoded = encode_checkpoint_value(checkpoint.to_dict())
            data = json.dumps(encoded, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        except Exception as exc:  # pickling and encoding failures surface as many types
            logger.error("Checkpoint %s cannot be encoded: %r", checkpoint.checkpoint_id, exc)
            raise CheckpointNotSaveable(
                "The workflow state holds a value that cannot be pickled (a function, a lock, a client); "
                "nothing was saved. Keep data only in executor state, JSON-native where you can."
            ) from exc
        if len(data) > self.max_bytes:
            raise CheckpointTooLarge(
                f"The resulting checkpoint is {len(data)} bytes, over the {self.max_bytes}-byte limit; "
                "nothing was saved.",
                details={"size_bytes": len(data), "max_bytes": self.max_bytes},
            )
        try:
            self._decode(data, expected_id=checkpoint.checkpoint_id)
        except _Refused as exc:
            logger.error(
                "Checkpoint %s would not decode, so it was not saved: %s. If the workflow keeps an "
                "application type in its state or requests, list it in its checkpoint_types "
                "(or prefer JSON-native state).",
                checkpoint.checkpoint_id,
                exc,
            )
            raise _not_on_the_allowlist(exc.type_key) from None
        return data

    def decode(self, data: bytes, *, expected_id: str | None = None) -> WorkflowCheckpoint:
        """Parse bytes from storage into a checkpoint, allowing only allowlisted types."""
        try:
            return self._decode(data, expected_id=expected_id)
        except _Refused as exc:
            logger.warning("Checkpoint %s refused: %s", expected_id, exc)
            raise CheckpointUnreadable(exc.public) from None

    # -- the decoder -----------------------------------------------------------------

    def _decode(self, data: bytes, *, expected_id: str | None) -> WorkflowCheckpoint:
        if len(data) > self.max_bytes:
            public = f"The checkpoint is over the {self.max_bytes}-byte limit and was not read."
            raise _Refused(f"{len(data)} bytes", public)
        try:
            raw: Any = json.loads(data.decode("utf-8"))
        except (ValueError, RecursionError) as exc:  # includes bad UTF-8 and over-long integers
            raise _Refused(
                f"not UTF-8 JSON ({type(exc).__name__})", "The checkpoint is not valid UTF-8 JSON."
            ) from None
        if not isinstance(raw, dict) or not set(raw) >= _REQUIRED_FIELDS or not set(raw) <= set(_FIELD_TYPES):
            raise _Refused("wrong fields", "The checkpoint does not have the fields of a workflow checkpoint.")
        for name, value in raw.items():
            expected = _FIELD_TYPES[name]
            if not isinstance(value, expected) or (isinstance(value, bool) and expected is int):
                raise _Refused(
                    f"field {name} is a {type(value).__name__}", f"The checkpoint field '{name}' has the wrong type."
                )
        if expected_id is not None and raw["checkpoint_id"] != expected_id:
            raise _Refused("ID mismatch", "The checkpoint's ID does not match the blob it was read from.")

        # Every pickle is scanned before any is loaded: one pickle's constructors never
        # run before another pickle in the same blob has been checked.
        budget = ScanBudget.for_checkpoint(len(data), self.limits)
        pickles: list[bytes] = []
        try:
            for envelope in _envelopes(raw):
                pickled = _pickle_bytes(envelope, self.limits.max_pickle_bytes)
                scan(pickled, self.allowlist, budget, self.limits)
                pickles.append(pickled)
        except (UnsafePickle, RecursionError) as exc:
            missing = exc.type_key if isinstance(exc, TypeNotAllowed) else None
            raise _Refused(f"pickle refused before loading: {exc}", _NOT_DECODABLE, missing) from None
        loaded = iter(pickles)
        try:
            decoded = _rebuild(raw, lambda envelope: self._load(next(loaded), envelope[_TYPE]))
            checkpoint = WorkflowCheckpoint.from_dict(decoded)
        except _Refused:
            raise
        except Exception as exc:  # the unpickler and the dataclass raise several types
            raise _Refused(f"does not decode ({type(exc).__name__}: {exc})", _NOT_DECODABLE) from None
        _check_pending_requests(checkpoint)
        return checkpoint

    def _load(self, pickled: bytes, type_key: str) -> Any:
        value = restricted_loads(pickled, self.allowlist)
        actual = f"{type(value).__module__}:{type(value).__qualname__}"
        if actual != type_key:
            raise _Refused(f"envelope says {type_key}, pickle holds {actual}", _NOT_DECODABLE)
        return value


def _not_on_the_allowlist(type_key: str | None) -> CheckpointNotSaveable:
    """What a caller may learn when a save is refused: the class (a name from the app's own
    code, never a value of the state) and the setting that admits it; the rest is logged."""
    if type_key is None:
        return CheckpointNotSaveable("The workflow state holds data this app could not read back; nothing was saved.")
    return CheckpointNotSaveable(
        f"The workflow state holds a {type_key}, which is not on the checkpoint allowlist; nothing was saved. "
        "List the class in the workflow's checkpoint_types (or in the CHECKPOINT_ALLOWED_TYPES setting), "
        "or keep the state JSON-native.",
        details={"type": type_key},
    )


def _is_envelope(value: dict[str, Any]) -> bool:
    """The framework's rule: a dict holding both markers is a pickle envelope."""
    return _PICKLED in value and _TYPE in value


def _envelopes(value: Any) -> Iterator[dict[str, Any]]:
    """Every pickle envelope in a JSON value, in the order ``_rebuild`` meets them."""
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if _is_envelope(item):
                yield item
            elif _PICKLED in item or _TYPE in item:
                raise UnsafePickle("a dict with one pickle marker (the encoder pickles those)")
            else:
                stack.extend(reversed(item.values()))
        elif isinstance(item, list):
            stack.extend(reversed(item))


def _rebuild(value: Any, load: Callable[[dict[str, Any]], Any]) -> Any:
    if isinstance(value, dict):
        if _is_envelope(value):
            return load(value)
        return {key: _rebuild(item, load) for key, item in value.items()}
    if isinstance(value, list):
        return [_rebuild(item, load) for item in value]
    return value


def _pickle_bytes(envelope: dict[str, Any], max_pickle_bytes: int) -> bytes:
    encoded, type_key = envelope[_PICKLED], envelope[_TYPE]
    if set(envelope) != _ENVELOPE_KEYS or not isinstance(encoded, str) or not isinstance(type_key, str):
        raise UnsafePickle("malformed pickle envelope")
    # Base64 is 4 characters per 3 bytes: refuse before decoding an oversized one.
    if len(encoded) > (max_pickle_bytes + 2) // 3 * 4:
        raise UnsafePickle(f"pickle over the {max_pickle_bytes}-byte limit")
    try:
        return base64.b64decode(encoded.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error):
        raise UnsafePickle("pickle envelope is not base64") from None


def _check_pending_requests(checkpoint: WorkflowCheckpoint) -> None:
    """Each pending request must be a request-info event filed under its own ID: the
    run answers it by reading its response type and source executor."""
    for request_id, event in checkpoint.pending_request_info_events.items():
        try:
            valid = (
                isinstance(event, WorkflowEvent)
                and event.type == "request_info"
                and event.request_id == request_id
                and isinstance(event.source_executor_id, str)
                and isinstance(event.response_type, type)
                and isinstance(event.request_type, type)
                and isinstance(event.data, event.request_type)
            )
        except RuntimeError:  # the event's accessors raise for events of other kinds
            valid = False
        if not valid:
            raise _Refused(
                f"pending request {request_id!r} is not a request-info event",
                "The checkpoint's pending requests are not requests this app can answer.",
            )
