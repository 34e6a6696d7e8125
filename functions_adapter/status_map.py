"""The one place an error type becomes an HTTP status and headers.

The library's errors carry a code and a message, nothing of HTTP; this table is the
edge where they become responses (as Starlette keeps statuses on ``HTTPException`` and
the Azure SDK maps them at its pipeline edge). Lookup follows the class hierarchy, so a
subclass without its own row answers like its parent.
"""

from __future__ import annotations

from functions_adapter import errors as transport
from resumable.base import errors as e

# Grouped by the families drawn atop ``resumable/base/errors.py``; a family has no row of its
# own (none is raised), so each error answers with its own row or its nearest ancestor's.
STATUS: dict[type[e.ResumeError], int] = {
    e.ResumeError: 500,
    # request rejected
    e.InvalidRequest: 400,
    e.Forbidden: 403,
    e.PreconditionFailed: 412,
    e.WorkflowNotFound: 404,
    e.WorkflowMismatch: 409,
    e.IdempotencyKeyReused: 422,
    e.RequestInProgress: 409,
    e.WebhookIdReused: 409,
    transport.PayloadTooLarge: 413,
    transport.UnsupportedMediaType: 415,
    transport.InvalidSignature: 401,
    transport.NotFound: 404,
    # thread
    e.ThreadNotFound: 404,
    e.ThreadBusy: 409,
    e.ThreadExpired: 410,
    e.ThreadUnreadable: 500,
    # checkpoint
    e.CheckpointNotFound: 404,
    e.CheckpointIncompatible: 409,
    e.PendingRequestsOutstanding: 409,
    e.CheckpointConflict: 409,
    e.CheckpointUnreadable: 422,
    e.CheckpointTooLarge: 422,
    e.CheckpointNotSaveable: 500,
    e.CheckpointNotInThread: 409,
    e.CheckpointInThread: 409,
    e.StateNotEditable: 422,
    # execution
    e.WorkflowFailed: 500,
    e.MigrationFailed: 500,
    e.OutcomeUnknown: 500,
    e.RunNotFound: 404,
    e.RunFinished: 409,
    e.RunRecordUnreadable: 500,
    # a background attempt's own outcomes, recorded on the run and never answered as such
    e.RunCancelled: 500,
    e.RunTakenOver: 500,
    e.AlreadyCommitted: 500,
    e.ProgressNotSaved: 500,
    e.HandedOn: 500,
    # storage
    e.StorageUnavailable: 503,
    e.RecordContended: 500,
    e.IdempotencyRecordUnreadable: 500,
    # configuration
    e.ServerMisconfigured: 500,
}

# Seconds a caller should wait before retrying: the thread or key is busy for about a
# turn; storage that failed needs longer. Only errors worth retrying have a row.
RETRY_AFTER_SECONDS: dict[type[e.ResumeError], int] = {
    e.ThreadBusy: 1,
    e.RequestInProgress: 1,
    e.StorageUnavailable: 5,
}


def _lookup(table: dict[type[e.ResumeError], int], error: e.ResumeError) -> int | None:
    for cls in type(error).__mro__:
        if cls in table:
            return table[cls]  # type: ignore[index]
    return None


def status_of(error: e.ResumeError) -> int:
    return _lookup(STATUS, error) or 500


def headers_of(error: e.ResumeError) -> dict[str, str]:
    """``Retry-After`` for an error worth retrying; ``x-should-retry: false`` (the header
    the OpenAI and Anthropic SDKs obey) for an outcome nobody can tell, which a blind
    retry could apply twice."""
    if isinstance(error, e.OutcomeUnknown):
        return {"x-should-retry": "false"}
    seconds = _lookup(RETRY_AFTER_SECONDS, error)
    return {} if seconds is None else {"Retry-After": str(seconds)}
