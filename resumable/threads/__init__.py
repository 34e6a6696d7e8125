"""Threads in storage: the pointer blob naming a thread's head (moved by compare-and-swap,
fenced for deletion), its history and metadata, deleting a thread whole, and the
housekeeping that sweeps lost races' checkpoints and keeps recent lineage alive. Running a
turn on a thread is the core's job (``core.thread_turns``).

Public here (``docs/library-api.md``): the names in ``__all__``, each imported on first use.
"""

from __future__ import annotations

from ..base.lazy_exports import lazy_exports

_EXPORTS = {
    "Caller": "ownership",
    "MAX_LIST_PAGE": "listing",
    "MAX_PAGE": "admin",
    "Metadata": "admin",
    "Report": "housekeeping",
    "ThreadBusy": "..base.errors",
    "ThreadError": "..base.errors",
    "ThreadExpired": "..base.errors",
    "ThreadHead": "pointers",
    "ThreadHeld": "pointers",
    "ThreadMessage": "transcript",
    "ThreadMetadata": "admin",
    "ThreadNotFound": "..base.errors",
    "ThreadPointers": "pointers",
    "ThreadSummary": "listing",
    "ThreadUnreadable": "..base.errors",
    "checkpoint_info": "ownership",
    "delete_thread": "delete",
    "expired": "pointers",
    "history": "admin",
    "list_threads": "listing",
    "messages_page": "transcript",
    "owned_head": "ownership",
    "run_housekeeping": "housekeeping",
    "snapshot": "transcript",
    "update_unless_deleted": "metadata_update",
    "validate_prefix": "listing",
}
__all__ = [
    "MAX_LIST_PAGE",
    "MAX_PAGE",
    "Caller",
    "Metadata",
    "Report",
    "ThreadBusy",
    "ThreadError",
    "ThreadExpired",
    "ThreadHead",
    "ThreadHeld",
    "ThreadMessage",
    "ThreadMetadata",
    "ThreadNotFound",
    "ThreadPointers",
    "ThreadSummary",
    "ThreadUnreadable",
    "checkpoint_info",
    "delete_thread",
    "expired",
    "history",
    "list_threads",
    "messages_page",
    "owned_head",
    "run_housekeeping",
    "snapshot",
    "update_unless_deleted",
    "validate_prefix",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
