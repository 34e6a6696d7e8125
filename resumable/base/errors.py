"""Typed errors, each with the stable code it is reported as. No HTTP here: an adapter
maps each type to a status (``functions_adapter/status_map.py`` for Azure Functions).

Every error a caller can see is one of these. Their messages are written for the
caller and never include exception text from below, so nothing internal (paths,
stack frames, storage URLs) leaks into a response.
"""

from __future__ import annotations

from typing import Any, ClassVar

MISCONFIGURED = "The function app is not configured correctly; see its logs."


class ResumeError(Exception):
    """Base of every error a caller can be shown, with a documented ``code``."""

    code: ClassVar[str] = "internal_error"

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def to_body(self) -> dict[str, Any]:
        """The ``{"error": {...}}`` body documented in docs/api.md (Errors)."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            error["details"] = self.details
        return {"error": error}


class InvalidRequest(ResumeError):
    """Malformed JSON, wrong shapes, a bad ID, or nothing to do."""

    code = "invalid_request"


class NoNewMessages(InvalidRequest):
    """A resent conversation (AG-UI) held nothing the thread lacks: the caller shows the thread."""

    code = "no_new_messages"


class CheckpointNotFound(ResumeError):
    code = "checkpoint_not_found"


class CheckpointIncompatible(ResumeError):
    """The checkpoint belongs to another workflow, or the graph changed since."""

    code = "checkpoint_incompatible"


class CheckpointHasInFlightWork(CheckpointIncompatible):
    """The checkpoint was taken mid-run; new input would interleave with old work."""


class PendingRequestsOutstanding(ResumeError):
    """New messages were sent while human-in-the-loop requests are still unanswered."""

    code = "pending_requests"


class CheckpointConflict(ResumeError):
    """A checkpoint with this ID already exists; checkpoints are never overwritten."""

    code = "checkpoint_exists"


class PayloadTooLarge(ResumeError):
    code = "payload_too_large"


class UnsupportedMediaType(ResumeError):
    """A JSON route was sent something declared as other than ``application/json``."""

    code = "unsupported_media_type"


class CheckpointUnreadable(ResumeError):
    """The checkpoint does not decode, or it holds a type the allowlist blocks."""

    code = "checkpoint_unreadable"


class CheckpointTooLarge(ResumeError):
    """A checkpoint is over the configured size cap; nothing was saved."""

    code = "checkpoint_too_large"


class CheckpointNotSaveable(ResumeError):
    """The run's state cannot be written as a checkpoint this app can read back (a type
    missing from the workflow's ``checkpoint_types``, or an unpicklable value). A bug in
    the workflow, not bad input: nothing was saved and no thread moved."""

    code = "checkpoint_not_saveable"


class WorkflowFailed(ResumeError):
    """The workflow run raised; nothing was saved."""

    code = "workflow_failed"


class OutcomeUnknown(ResumeError):
    """Storage failed after a turn's commit point and whether it committed cannot be told:
    never answered as retryable, since a blind retry could apply the turn twice."""

    code = "outcome_unknown"


class InvalidSignature(ResumeError):
    """The webhook signature is missing, stale or wrong (checked before any storage access)."""

    code = "invalid_signature"


class ThreadBusy(ResumeError):
    """Another turn advanced the thread first; this turn was not applied."""

    code = "thread_busy"


class RequestInProgress(ResumeError):
    """A request with this Idempotency-Key is still running."""

    code = "request_in_progress"


class IdempotencyKeyReused(ResumeError):
    """The Idempotency-Key was first used with a different request body."""

    code = "idempotency_key_reused"


class IdempotencyRecordUnreadable(ResumeError):
    """An Idempotency-Key's record exists but cannot be read; never taken as "no record"."""

    code = "idempotency_record_unreadable"


class WebhookIdReused(ResumeError):
    """A signed delivery's webhook-id was seen before with another route or body: a replay."""

    code = "webhook_id_reused"


class ThreadNotFound(ResumeError):
    code = "thread_not_found"


class ConfigurationError(ValueError):
    """A setting is missing or malformed: a deployment problem, reported at first use.

    Raised by settings readers (the adapter's, a workflow factory's); adapters report it
    as ``ServerMisconfigured`` with the detail only in their logs.
    """


class ServerMisconfigured(ResumeError):
    """A setting is missing or malformed; the detail is in the logs, not the response."""

    code = "server_misconfigured"

    def __init__(self, message: str = MISCONFIGURED, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message, details=details)


class StorageUnavailable(ResumeError):
    """Blob Storage could not be reached or answered with a server error."""

    code = "storage_unavailable"


class ThreadExpired(ResumeError):
    """Retention removed the thread's state after it sat idle; its pointer is dropped so the ID starts afresh."""

    code = "thread_expired"


class ThreadUnreadable(ResumeError):
    """The thread's pointer blob is not one this app wrote; nothing ran and nothing changed."""

    code = "thread_unreadable"


class ClaimLost(RequestInProgress):
    """This request's Idempotency-Key claim was taken over (it was thought dead); it must not commit."""


class RunNotFound(ResumeError):
    """No background run has this ID."""

    code = "run_not_found"


class RunFinished(ResumeError):
    """The background run already finished; it cannot be cancelled."""

    code = "run_finished"


class RunRecordUnreadable(ResumeError):
    """A background run's record exists but is not one this app wrote."""

    code = "run_record_unreadable"


class RunCancelled(ResumeError):
    """The background run was cancelled before it committed anything."""

    code = "cancelled"


class RunTakenOver(ResumeError):
    """This attempt's lease on a background run passed to another delivery; it commits nothing."""

    code = "lease_lost"


class AlreadyCommitted(ResumeError):
    """An earlier attempt of this background run committed; its result is the run's."""

    code = "already_committed"

    def __init__(self, body: bytes) -> None:
        super().__init__("An earlier attempt of this run committed.")
        self.body = body


class CheckpointNotInThread(ResumeError):
    """A fork named a checkpoint outside the thread's lineage (another thread's, or a lost race's)."""

    code = "checkpoint_not_in_thread"


class CheckpointInThread(ResumeError):
    """A call without a thread named a thread's checkpoint: a thread's state is continued or
    forked through its thread only, so no copy of it outlives the thread."""

    code = "checkpoint_in_thread"


class StateNotEditable(ResumeError):
    """An edit of an executor's state whose saved state JSON cannot hold (it was pickled)."""

    code = "state_not_editable"


class Forbidden(ResumeError):
    """The thread authorizer refused this request; nothing was read or run."""

    code = "forbidden"


class PreconditionFailed(ResumeError):
    """An ``If-Match`` ETag no longer matches: someone changed the resource first."""

    code = "precondition_failed"


class NotFound(ResumeError):
    """Nothing is there by that name: what a host answers for a path no function serves (the
    console's files when the console is off, or a name that is not one of them)."""

    code = "not_found"


class WorkflowNotFound(ResumeError):
    """A request named a workflow (or a version of one) this app does not host."""

    code = "workflow_not_found"


class WorkflowMismatch(ResumeError):
    """A request named another workflow than the one its thread or checkpoint runs on, or
    an older version than the thread's (a thread never moves back); nothing ran."""

    code = "workflow_mismatch"


class MigrationFailed(ResumeError):
    """A migration to a newer workflow version raised: nothing ran, nothing was saved, and
    the thread stays on its version. A bug in the app's migration, not in the request."""

    code = "migration_failed"
