"""Typed errors, each carrying the HTTP status and code it is reported as.

Every error a caller can see is one of these. Their messages are written for the
caller and never include exception text from below, so nothing internal (paths,
stack frames, storage URLs) leaks into a response.
"""

from __future__ import annotations

from typing import Any, ClassVar

MISCONFIGURED = "The function app is not configured correctly; see its logs."


class ResumeError(Exception):
    """Base of every error that maps to a documented HTTP response."""

    status: ClassVar[int] = 500
    code: ClassVar[str] = "internal_error"

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def headers(self) -> dict[str, str]:
        """Extra response headers (for example ``Retry-After``)."""
        return {}

    def to_body(self) -> dict[str, Any]:
        """The ``{"error": {...}}`` body documented in the README."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            error["details"] = self.details
        return {"error": error}


class InvalidRequest(ResumeError):
    """Malformed JSON, wrong shapes, a bad ID, or nothing to do."""

    status = 400
    code = "invalid_request"


class CheckpointNotFound(ResumeError):
    status = 404
    code = "checkpoint_not_found"


class CheckpointIncompatible(ResumeError):
    """The checkpoint belongs to another workflow, or the graph changed since."""

    status = 409
    code = "checkpoint_incompatible"


class CheckpointHasInFlightWork(CheckpointIncompatible):
    """The checkpoint was taken mid-run; new input would interleave with old work."""


class PendingRequestsOutstanding(ResumeError):
    """New messages were sent while human-in-the-loop requests are still unanswered."""

    status = 409
    code = "pending_requests"


class CheckpointConflict(ResumeError):
    """A checkpoint with this ID already exists; checkpoints are never overwritten."""

    status = 409
    code = "checkpoint_exists"


class PayloadTooLarge(ResumeError):
    status = 413
    code = "payload_too_large"


class UnsupportedMediaType(ResumeError):
    """A JSON route was sent something declared as other than ``application/json``."""

    status = 415
    code = "unsupported_media_type"


class CheckpointUnreadable(ResumeError):
    """The checkpoint does not decode, or it holds a type the allowlist blocks."""

    status = 422
    code = "checkpoint_unreadable"


class CheckpointTooLarge(ResumeError):
    """A checkpoint is over the configured size cap; nothing was saved."""

    status = 422
    code = "checkpoint_too_large"


class CheckpointNotSaveable(ResumeError):
    """The run's state cannot be written as a checkpoint this app can read back (a type
    missing from the workflow's ``checkpoint_types``, or an unpicklable value). A bug in
    the workflow, not bad input: nothing was saved and no thread moved."""

    status = 500
    code = "checkpoint_not_saveable"


class WorkflowFailed(ResumeError):
    """The workflow run raised; nothing was saved."""

    status = 500
    code = "workflow_failed"


class InvalidSignature(ResumeError):
    """The webhook signature is missing, stale or wrong (checked before any storage access)."""

    status = 401
    code = "invalid_signature"


class ThreadBusy(ResumeError):
    """Another turn advanced the thread first; this turn was not applied."""

    status = 409
    code = "thread_busy"

    def headers(self) -> dict[str, str]:
        return {"Retry-After": "1"}


class RequestInProgress(ResumeError):
    """A request with this Idempotency-Key is still running."""

    status = 409
    code = "request_in_progress"

    def headers(self) -> dict[str, str]:
        return {"Retry-After": "1"}


class IdempotencyKeyReused(ResumeError):
    """The Idempotency-Key was first used with a different request body."""

    status = 422
    code = "idempotency_key_reused"


class IdempotencyRecordUnreadable(ResumeError):
    """An Idempotency-Key's record exists but cannot be read; never taken as "no record"."""

    status = 500
    code = "idempotency_record_unreadable"


class WebhookIdReused(ResumeError):
    """A signed delivery's webhook-id was seen before with another route or body: a replay."""

    status = 409
    code = "webhook_id_reused"


class ThreadNotFound(ResumeError):
    status = 404
    code = "thread_not_found"


class ServerMisconfigured(ResumeError):
    """A setting is missing or malformed; the detail is in the logs, not the response."""

    status = 500
    code = "server_misconfigured"

    def __init__(self, message: str = MISCONFIGURED, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message, details=details)


class StorageUnavailable(ResumeError):
    """Blob Storage could not be reached or answered with a server error."""

    status = 503
    code = "storage_unavailable"
    retry_after_seconds: ClassVar[int] = 5

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after_seconds)}


class ThreadExpired(ResumeError):
    """Retention removed the thread's state after it sat idle; its pointer is dropped so the ID starts afresh."""

    status = 410
    code = "thread_expired"


class ThreadUnreadable(ResumeError):
    """The thread's pointer blob is not one this app wrote; nothing ran and nothing changed."""

    status = 500
    code = "thread_unreadable"
