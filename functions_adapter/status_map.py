"""The one place an error type becomes an HTTP status and headers.

The library's errors carry a code and a message, nothing of HTTP; this table is the
edge where they become responses (as Starlette keeps statuses on ``HTTPException`` and
the Azure SDK maps them at its pipeline edge). Lookup follows the class hierarchy, so a
subclass without its own row answers like its parent.
"""

from __future__ import annotations

from resumable.base import errors as e

STATUS: dict[type[e.ResumeError], int] = {
    e.ResumeError: 500,
    e.InvalidRequest: 400,
    e.InvalidSignature: 401,
    e.CheckpointNotFound: 404,
    e.ThreadNotFound: 404,
    e.WorkflowNotFound: 404,
    e.NotFound: 404,
    e.WorkflowMismatch: 409,
    e.MigrationFailed: 500,
    e.RunNotFound: 404,
    e.RunFinished: 409,
    e.CheckpointNotInThread: 409,
    e.CheckpointInThread: 409,
    e.Forbidden: 403,
    e.PreconditionFailed: 412,
    e.CheckpointIncompatible: 409,
    e.PendingRequestsOutstanding: 409,
    e.CheckpointConflict: 409,
    e.ThreadBusy: 409,
    e.RequestInProgress: 409,
    e.WebhookIdReused: 409,
    e.ThreadExpired: 410,
    e.PayloadTooLarge: 413,
    e.UnsupportedMediaType: 415,
    e.CheckpointUnreadable: 422,
    e.CheckpointTooLarge: 422,
    e.StateNotEditable: 422,
    e.IdempotencyKeyReused: 422,
    e.CheckpointNotSaveable: 500,
    e.WorkflowFailed: 500,
    e.IdempotencyRecordUnreadable: 500,
    e.ServerMisconfigured: 500,
    e.ThreadUnreadable: 500,
    e.RunRecordUnreadable: 500,
    e.OutcomeUnknown: 500,
    e.StorageUnavailable: 503,
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
