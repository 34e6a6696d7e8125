"""Every storage write the app makes, registered in one place: the fault matrix's rows.

A write site is one kind of write to one kind of blob (or to the run queue): its blob
name pattern, built from ``layout``'s prefixes, and its operation kind. Two tests hold
this table to the code (``tests/adapter/test_write_sites.py``): a static scan finds every
raw storage SDK write call in ``resumable/`` and ``functions_adapter/`` and requires its
module to be a registered ``writer`` of a site of that kind; and at run time every write
request that leaves the client must match a site by its blob name and its kind. The fault
matrix (``tests/adapter/test_fault_matrix.py``) then injects each fault at each site.

A new write therefore fails a test until it is registered here, and a registered write is
then run under every fault: that is how the class of "lost, doubled or stuck" defects is
kept visible rather than found one surface at a time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from . import layout


class Kind(StrEnum):
    """What a write does, as the request on the wire shows it."""

    CREATE = "create"  # PUT with If-None-Match: * (create-only; a retry meets 409)
    REPLACE = "replace"  # PUT with If-Match: <etag> (a retry meets 412)
    DELETE = "delete"  # DELETE, conditional (If-Match) or not
    APPEND_CREATE = "append-create"  # PUT x-ms-blob-type: AppendBlob (an empty append blob)
    APPEND = "append"  # PUT comp=appendblock
    SEND = "send"  # POST <queue>/messages (not idempotent: a retry sends twice)
    CONTAINER = "container"  # PUT restype=container (create on first use)
    QUEUE = "queue"  # PUT <queue> (create on first use)


# Which raw SDK calls issue which kinds (the static scan's vocabulary). Calls that appear in
# no site are refused wherever they are written: an unconditional overwrite, block staging,
# metadata or tier changes, leases.
SDK_CALLS: dict[str, frozenset[Kind]] = {
    "upload_blob": frozenset({Kind.CREATE, Kind.REPLACE}),
    "delete_blob": frozenset({Kind.DELETE}),
    "delete_blobs": frozenset({Kind.DELETE}),
    "create_append_blob": frozenset({Kind.APPEND_CREATE}),
    "append_block": frozenset({Kind.APPEND}),
    "send_message": frozenset({Kind.SEND}),
    "create_container": frozenset({Kind.CONTAINER}),
    "create_queue": frozenset({Kind.QUEUE}),
    "set_blob_metadata": frozenset(),
    "set_http_headers": frozenset(),
    "commit_block_list": frozenset(),
    "stage_block": frozenset(),
    "stage_block_from_url": frozenset(),
    "upload_blob_from_url": frozenset(),
    "start_copy_from_url": frozenset(),
    "set_standard_blob_tier": frozenset(),
    "set_blob_tags": frozenset(),
    "acquire_lease": frozenset(),
    "create_snapshot": frozenset(),
    "undelete_blob": frozenset(),
    "delete_container": frozenset(),
    "delete_queue": frozenset(),
    "update_message": frozenset(),
    "delete_message": frozenset(),
    "clear_messages": frozenset(),
    "set_queue_metadata": frozenset(),
}

_ID = r"[^/]+"
RECORDS = "resumable/storage/blob_records.py"  # every JSON record: create, replace, delete
UPLOAD_NEW = "resumable/storage/failures.py"  # create-only uploads and the container
CHECKPOINT_STORE = "resumable/checkpoints/blob_store.py"
EVENT_LOG = "resumable/background/events.py"
PROGRESS = "resumable/background/progress.py"
RUN_QUEUE = "resumable/storage/run_queue.py"
THREAD_DELETE = "resumable/threads/delete.py"
HOUSEKEEPING = "resumable/threads/housekeeping.py"
EVENT_SWEEP = "resumable/threads/event_sweep.py"


@dataclass(frozen=True)
class WriteSite:
    """One registered write: ``pattern`` matches the blob name (or the queue's role)."""

    name: str
    prefix: str  # from ``layout``; "" for the queue
    kind: Kind
    pattern: str  # a regular expression over the blob name, anchored at both ends
    writers: tuple[str, ...]  # the modules whose raw SDK calls issue it
    during: tuple[str, ...]  # what makes it: turn, keyed, accept, execute, delete, callback, ...

    def matches(self, kind: Kind, blob: str) -> bool:
        return kind is self.kind and re.fullmatch(self.pattern, blob) is not None


def _record(prefix: str) -> str:
    return re.escape(prefix) + _ID + r"\.json"


def _records(name: str, prefix: str, during: tuple[str, ...]) -> list[WriteSite]:
    """A JSON record's three writes, all through ``BlobRecords`` (``RecordStore``): its
    create is ``upload_new``'s create-only upload."""
    return [
        WriteSite(f"{name}.create", prefix, Kind.CREATE, _record(prefix), (UPLOAD_NEW,), during),
        WriteSite(f"{name}.replace", prefix, Kind.REPLACE, _record(prefix), (RECORDS,), during),
        WriteSite(f"{name}.delete", prefix, Kind.DELETE, _record(prefix), (RECORDS,), during),
    ]


_EVENTS = re.escape(layout.RUNS) + _ID + r"/events-\d+\.jsonl"
_PROGRESS = re.escape(layout.RUNS) + _ID + r"/progress-\d+\.bin"

SITES: tuple[WriteSite, ...] = (
    WriteSite(
        "checkpoint.save",
        layout.CHECKPOINTS,
        Kind.CREATE,
        _record(layout.CHECKPOINTS),
        (UPLOAD_NEW,),
        ("turn", "keyed", "execute"),
    ),
    WriteSite(
        "checkpoint.delete",
        layout.CHECKPOINTS,
        Kind.DELETE,
        _record(layout.CHECKPOINTS),
        (CHECKPOINT_STORE,),  # deletion and the sweeps go through the store, which forgets its cache
        ("turn", "delete", "sweep"),
    ),
    *_records("thread.pointer", layout.THREADS, ("turn", "keyed", "execute", "fork", "delete")),
    *_records("thread.metadata", layout.THREAD_METADATA, ("metadata", "delete")),
    *_records("idempotency", layout.IDEMPOTENCY, ("keyed", "accept", "delete")),
    *_records("run.record", layout.RUNS, ("accept", "execute", "callback", "delete")),
    *_records("run.order", layout.RUN_ORDER, ("accept", "execute", "delete")),
    *_records("callback", layout.CALLBACKS, ("execute", "callback", "delete")),
    *_records("maintenance.state", layout.MAINTENANCE, ("sweep",)),
    WriteSite(
        "maintenance.references.create",
        layout.MAINTENANCE,
        Kind.CREATE,
        re.escape(layout.MAINTENANCE) + r"references-[0-9a-f]+\.bin",
        (UPLOAD_NEW,),
        ("sweep",),
    ),
    WriteSite(
        "maintenance.references.delete",
        layout.MAINTENANCE,
        Kind.DELETE,
        re.escape(layout.MAINTENANCE) + r"references-[0-9a-f]+\.bin",
        (HOUSEKEEPING,),
        ("sweep",),
    ),
    WriteSite("run.events.create", layout.RUNS, Kind.APPEND_CREATE, _EVENTS, (EVENT_LOG,), ("execute",)),
    WriteSite("run.events.append", layout.RUNS, Kind.APPEND, _EVENTS, (EVENT_LOG,), ("execute",)),
    WriteSite(
        "run.events.delete",
        layout.RUNS,
        Kind.DELETE,
        _EVENTS,
        # DELETE of a thread (its page of logs); a writer whose run's record is gone; the logs of
        # a deleted run (a thread's or a response's DELETE) and housekeeping's sweep of logs
        # whose record is gone (threads/event_sweep.py)
        (THREAD_DELETE, EVENT_LOG, EVENT_SWEEP),
        ("delete", "execute", "sweep"),
    ),
    # A ``superstep`` turn's progress checkpoint: created at its attempt's first superstep,
    # replaced (If-Match) at each later one, removed when the run ends, with its thread, or by
    # the sweep of runs that ended without removing it.
    WriteSite("run.progress.create", layout.RUNS, Kind.CREATE, _PROGRESS, (UPLOAD_NEW,), ("execute",)),
    WriteSite("run.progress.replace", layout.RUNS, Kind.REPLACE, _PROGRESS, (PROGRESS,), ("execute",)),
    WriteSite(
        "run.progress.delete",
        layout.RUNS,
        Kind.DELETE,
        _PROGRESS,
        (PROGRESS, THREAD_DELETE, EVENT_SWEEP),
        ("execute", "delete", "sweep"),
    ),
    WriteSite("container.create", "", Kind.CONTAINER, "", (UPLOAD_NEW,), ("turn", "execute")),
    WriteSite("queue.send", "", Kind.SEND, "", (RUN_QUEUE,), ("accept", "execute", "callback")),
    WriteSite("queue.create", "", Kind.QUEUE, "", (RUN_QUEUE,), ("accept",)),
)

BY_NAME = {site.name: site for site in SITES}


def site_for(kind: Kind, blob: str) -> WriteSite | None:
    """The registered site a write of ``kind`` to ``blob`` belongs to (None: unregistered)."""
    for site in SITES:
        if site.matches(kind, blob):
            return site
    return None


def writers_of(call: str) -> frozenset[str]:
    """The modules registered to issue the raw SDK call ``call``."""
    kinds = SDK_CALLS.get(call, frozenset())
    return frozenset(module for site in SITES if site.kind in kinds for module in site.writers)


__all__ = ["BY_NAME", "SDK_CALLS", "SITES", "Kind", "WriteSite", "site_for", "writers_of"]
