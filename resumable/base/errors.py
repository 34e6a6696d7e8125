"""Typed errors, each with the stable ``code`` it is reported as, grouped in families.

No HTTP here: an adapter maps each type to a status (``functions_adapter/status_map.py``
for Azure Functions, whose own transport errors live in ``functions_adapter/errors.py``).
Every error a caller can see is one of these. Their messages are written for the caller
and never include exception text from below, so nothing internal (paths, stack frames,
storage URLs) leaks into a response. A family says what went wrong in whose terms; it is
never raised itself. ``tests/adapter/test_error_tree.py`` holds this drawing to the code
(names, parents, codes and the module of each class drawn from elsewhere)::

    ResumeError                         internal_error
    ├── RequestRejected
    │   ├── InvalidRequest              invalid_request
    │   │   ├── NoNewMessages           no_new_messages
    │   │   ├── CallbackRefused         invalid_request           [functions_adapter/callback_url.py]
    │   │   ├── ModelNotFound           model_not_found           [functions_adapter/openai/request.py]
    │   │   └── UnknownParameter        unknown_parameter         [functions_adapter/openai/request.py]
    │   ├── Forbidden                   forbidden
    │   ├── PreconditionFailed          precondition_failed
    │   ├── WorkflowNotFound            workflow_not_found
    │   ├── WorkflowMismatch            workflow_mismatch
    │   ├── IdempotencyKeyReused        idempotency_key_reused
    │   ├── RequestInProgress           request_in_progress
    │   │   ├── ClaimLost               request_in_progress
    │   │   ├── ConversationDeleting    conversation_deleting     [functions_adapter/openai/conversations_api.py]
    │   │   └── ResponseInProgress      response_in_progress      [functions_adapter/openai/objects.py]
    │   ├── WebhookIdReused             webhook_id_reused
    │   ├── PayloadTooLarge             payload_too_large         [functions_adapter/errors.py]
    │   ├── UnsupportedMediaType        unsupported_media_type    [functions_adapter/errors.py]
    │   ├── InvalidSignature            invalid_signature         [functions_adapter/errors.py]
    │   └── NotFound                    not_found                 [functions_adapter/errors.py]
    ├── ThreadError
    │   ├── ThreadNotFound              thread_not_found
    │   │   └── ConversationNotFound    conversation_not_found    [functions_adapter/openai/conversations_api.py]
    │   ├── ThreadBusy                  thread_busy
    │   │   └── ThreadHeld              thread_busy               [resumable/threads/pointers.py]
    │   ├── ThreadExpired               thread_expired
    │   └── ThreadUnreadable            thread_unreadable
    ├── CheckpointError
    │   ├── CheckpointNotFound          checkpoint_not_found
    │   │   └── BlobCheckpointNotFound  checkpoint_not_found      [resumable/checkpoints/blob_store.py]
    │   ├── CheckpointIncompatible      checkpoint_incompatible
    │   │   └── CheckpointHasInFlightWork checkpoint_incompatible
    │   ├── PendingRequestsOutstanding  pending_requests
    │   ├── CheckpointConflict          checkpoint_exists
    │   ├── CheckpointUnreadable        checkpoint_unreadable
    │   ├── CheckpointTooLarge          checkpoint_too_large
    │   ├── CheckpointNotSaveable       checkpoint_not_saveable
    │   ├── CheckpointNotInThread       checkpoint_not_in_thread
    │   ├── CheckpointInThread          checkpoint_in_thread
    │   └── StateNotEditable            state_not_editable
    ├── ExecutionError
    │   ├── WorkflowFailed              workflow_failed
    │   ├── MigrationFailed             migration_failed
    │   ├── OutcomeUnknown              outcome_unknown
    │   ├── RunNotFound                 run_not_found
    │   │   └── ResponseNotFound        response_not_found        [functions_adapter/openai/objects.py]
    │   ├── RunFinished                 run_finished
    │   ├── RunCancelled                cancelled
    │   ├── RunTakenOver                lease_lost
    │   ├── AlreadyCommitted            already_committed
    │   ├── RunRecordUnreadable         run_record_unreadable
    │   ├── ProgressNotSaved            progress_not_saved
    │   └── HandedOn                    handed_on
    ├── StorageError
    │   ├── StorageUnavailable          storage_unavailable
    │   ├── RecordContended             record_contended
    │   └── IdempotencyRecordUnreadable idempotency_record_unreadable
    └── ServerMisconfigured             server_misconfigured

The families: ``RequestRejected``, the request cannot be served as sent or not for this
caller; ``ThreadError``, the thread is missing, busy, expired or unreadable;
``CheckpointError``, a checkpoint cannot be used, saved or edited as asked; ``ExecutionError``,
running a workflow failed or its outcome is unknown, or a background run is not in a state
for what was asked; ``StorageError``, storage failed or holds what this app cannot read;
``ServerMisconfigured``, the configuration family, one error whose detail stays in the logs.

``ConfigurationError`` (a ``ValueError``, not a ``ResumeError``) is what settings readers
raise; the edge (``boundary.py``) reports it as ``ServerMisconfigured``. A few exceptions
never reach a caller and stay beside the code that raises and catches them:
``RecordConflict`` and ``RecordUnreadable`` (``storage/blob_records.py``),
``Refused`` (``storage/record_store.py``), ``RecordNotReady`` (``background/drain.py``:
redeliver the message) and ``CheckCommit`` (``core/idempotency_record.py``: a storage read
decides whether the checkpoint it names was committed).
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


class RequestRejected(ResumeError):
    """The request cannot be served as sent, or not for this caller; nothing ran."""


class InvalidRequest(RequestRejected):
    """Malformed JSON, wrong shapes, a bad ID, or nothing to do."""

    code = "invalid_request"


class NoNewMessages(InvalidRequest):
    """A resent conversation (AG-UI) held nothing the thread lacks: the caller shows the thread."""

    code = "no_new_messages"


class Forbidden(RequestRejected):
    """The thread authorizer refused this request; nothing was read or run."""

    code = "forbidden"


class PreconditionFailed(RequestRejected):
    """An ``If-Match`` ETag no longer matches: someone changed the resource first."""

    code = "precondition_failed"


class WorkflowNotFound(RequestRejected):
    """A request named a workflow (or a version of one) this app does not host."""

    code = "workflow_not_found"


class WorkflowMismatch(RequestRejected):
    """A request named another workflow than the one its thread or checkpoint runs on, or
    an older version than the thread's (a thread never moves back); nothing ran."""

    code = "workflow_mismatch"


class IdempotencyKeyReused(RequestRejected):
    """The Idempotency-Key was first used with a different request body."""

    code = "idempotency_key_reused"


class RequestInProgress(RequestRejected):
    """A request with this Idempotency-Key is still running."""

    code = "request_in_progress"


class ClaimLost(RequestInProgress):
    """This request's Idempotency-Key claim was taken over (it was thought dead); it must not commit."""


class WebhookIdReused(RequestRejected):
    """A signed delivery's webhook-id was seen before with another route or body: a replay."""

    code = "webhook_id_reused"


class ThreadError(ResumeError):
    """The thread named is missing, busy, expired or unreadable."""


class ThreadNotFound(ThreadError):
    """No thread has this ID (it never had a turn, or it was deleted)."""

    code = "thread_not_found"


class ThreadBusy(ThreadError):
    """Another turn advanced the thread first; this turn was not applied."""

    code = "thread_busy"


class ThreadExpired(ThreadError):
    """Retention removed the thread's state after it sat idle; its pointer is dropped so the ID starts afresh."""

    code = "thread_expired"


class ThreadUnreadable(ThreadError):
    """The thread's pointer blob, or the metadata that says whose an unclaimed thread is, is
    not one this app wrote; nothing ran and nothing changed, whoever asked."""

    code = "thread_unreadable"


class CheckpointError(ResumeError):
    """The checkpoint named (or the one a run would save) cannot be used as asked."""


class CheckpointNotFound(CheckpointError):
    """No checkpoint has this ID."""

    code = "checkpoint_not_found"


class CheckpointIncompatible(CheckpointError):
    """The checkpoint belongs to another workflow, or the graph changed since."""

    code = "checkpoint_incompatible"


class CheckpointHasInFlightWork(CheckpointIncompatible):
    """The checkpoint was taken mid-run; new input would interleave with old work."""


class PendingRequestsOutstanding(CheckpointError):
    """New messages were sent while human-in-the-loop requests are still unanswered."""

    code = "pending_requests"


class CheckpointConflict(CheckpointError):
    """A checkpoint with this ID already exists; checkpoints are never overwritten."""

    code = "checkpoint_exists"


class CheckpointUnreadable(CheckpointError):
    """The checkpoint does not decode, or it holds a type the allowlist blocks."""

    code = "checkpoint_unreadable"


class CheckpointTooLarge(CheckpointError):
    """A checkpoint is over the configured size cap; nothing was saved."""

    code = "checkpoint_too_large"


class CheckpointNotSaveable(CheckpointError):
    """The run's state cannot be written as a checkpoint this app can read back (a type
    missing from the workflow's ``checkpoint_types``, or an unpicklable value). A bug in
    the workflow, not bad input: nothing was saved and no thread moved."""

    code = "checkpoint_not_saveable"


class CheckpointNotInThread(CheckpointError):
    """A fork named a checkpoint outside the thread's lineage (another thread's, or a lost race's)."""

    code = "checkpoint_not_in_thread"


class CheckpointInThread(CheckpointError):
    """A call without a thread named a thread's checkpoint: a thread's state is continued or
    forked through its thread only, so no copy of it outlives the thread."""

    code = "checkpoint_in_thread"


class StateNotEditable(CheckpointError):
    """An edit of an executor's state whose saved state JSON cannot hold (it was pickled)."""

    code = "state_not_editable"


class ExecutionError(ResumeError):
    """Running a workflow: a turn that failed or whose outcome is unknown, or a background run's state."""


class WorkflowFailed(ExecutionError):
    """The workflow run raised; nothing was saved."""

    code = "workflow_failed"


class MigrationFailed(ExecutionError):
    """A migration to a newer workflow version raised: nothing ran, nothing was saved, and
    the thread stays on its version. A bug in the app's migration, not in the request."""

    code = "migration_failed"


class OutcomeUnknown(ExecutionError):
    """Storage failed after a turn's commit point and whether it committed cannot be told:
    never answered as retryable, since a blind retry could apply the turn twice."""

    code = "outcome_unknown"


class RunNotFound(ExecutionError):
    """No background run has this ID."""

    code = "run_not_found"


class RunFinished(ExecutionError):
    """The background run already finished; it cannot be cancelled."""

    code = "run_finished"


class RunCancelled(ExecutionError):
    """The background run was cancelled before it committed anything."""

    code = "cancelled"


class RunTakenOver(ExecutionError):
    """This attempt's lease on a background run passed to another delivery; it commits nothing."""

    code = "lease_lost"


class AlreadyCommitted(ExecutionError):
    """An earlier attempt of this background run committed; its result is the run's."""

    code = "already_committed"

    def __init__(self, body: bytes) -> None:
        super().__init__("An earlier attempt of this run committed.")
        self.body = body


class RunRecordUnreadable(ExecutionError):
    """A background run's record exists but is not one this app wrote."""

    code = "run_record_unreadable"


class ProgressNotSaved(ExecutionError):
    """A progress checkpoint could not be written: the run stops and the next delivery
    continues from the last one that was."""

    code = "progress_not_saved"


class HandedOn(ExecutionError):
    """The attempt spent its time budget: it stopped at a superstep boundary, after saving
    progress, and the run goes on in a new invocation."""

    code = "handed_on"


class StorageError(ResumeError):
    """Storage failed or held something this app cannot read; the request itself was fine."""


class StorageUnavailable(StorageError):
    """Blob Storage could not be reached or answered with a server error."""

    code = "storage_unavailable"


class RecordContended(StorageError):
    """A record changed under every attempt to update it; nothing was written."""

    code = "record_contended"


class IdempotencyRecordUnreadable(StorageError):
    """An Idempotency-Key's record exists but cannot be read; never taken as "no record"."""

    code = "idempotency_record_unreadable"


class ServerMisconfigured(ResumeError):
    """A setting is missing or malformed; the detail is in the logs, not the response."""

    code = "server_misconfigured"

    def __init__(self, message: str = MISCONFIGURED, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message, details=details)


class ConfigurationError(ValueError):
    """A setting is missing or malformed: a deployment problem, reported at first use.

    Raised by settings readers (the adapter's, a workflow factory's); adapters report it
    as ``ServerMisconfigured`` with the detail only in their logs.
    """


# The families, in the order drawn above: each error descends from exactly one.
FAMILIES: tuple[type[ResumeError], ...] = (
    RequestRejected,
    ThreadError,
    CheckpointError,
    ExecutionError,
    StorageError,
    ServerMisconfigured,
)
