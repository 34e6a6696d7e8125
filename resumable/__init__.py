"""Resume Agent Framework workflows from checkpoints in Azure Blob Storage, in one run.

The library layer: it knows Agent Framework and Blob Storage, and nothing of HTTP or
Azure Functions (``functions_adapter`` is the Functions host). Any async Python host
can use it: a FastAPI app, a queue worker, a script.

* ``prepare_run(workflow, checkpoint, TurnInput(...))``: validate and hydrate, run
  nothing; the ``PreparedRun``'s ``events()`` run it once, ``final_checkpoint()`` is
  what to save. The upstream v2 ``Workflow.run(checkpoint=...)`` (agent-framework
  #8522) would replace the hydrate step inside ``resume``/``af_internals`` only.
* ``BlobCheckpointStorage`` (+ ``CheckpointCodec``): create-only checkpoint blobs with a
  guarded decoder and a warm-instance cache; the library's narrow ``CheckpointStore``
  (save, load, delete, info, a page of infos) and the framework's ``CheckpointStorage``.
* ``RunService`` / ``ThreadRunner``: load → prepare → run → save (→ advance a thread).
* ``ThreadPointers``: threads as pointer blobs moved by compare-and-swap.
* ``IdempotencyStore`` + ``HeldClaim``: one run per key, replayed to every retry.
* ``RunOwner``: one call's whole lifetime, cleanup included, for any entry point.
* ``BackgroundRuns`` (+ ``RunRecords``, ``RunQueue``): queued runs executed at most once
  per run, whatever the queue redelivers; ``ThreadOrder`` keeps a thread's turns in order.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .base.version import __version__

# Name -> defining module, imported on first use (PEP 562): ``from resumable.ids import
# validate_id`` must not pay for background runs, threads and the queue SDK at cold start.
_EXPORTS = {
    "BackgroundRuns": "background",
    "BlobCheckpointStorage": "checkpoints.blob_store",
    "CheckpointCodec": "checkpoints.codec",
    "CheckpointStore": "checkpoints.store",
    "HeldClaim": "core.held_claim",
    "IdempotencyStore": "core.idempotency",
    "PreparedRun": "core.resume",
    "ResumeError": "base.errors",
    "RunOwner": "core.run_owner",
    "RunQueue": "storage.run_queue",
    "RunRecords": "background.records",
    "RunRequest": "core.runs",
    "RunService": "core.runs",
    "ThreadOrder": "background.order",
    "ThreadPointers": "threads.pointers",
    "ThreadRunner": "core.thread_turns",
    "TurnInput": "core.resume",
    "prepare_run": "core.resume",
}
__all__ = [
    "BackgroundRuns",
    "BlobCheckpointStorage",
    "CheckpointCodec",
    "CheckpointStore",
    "HeldClaim",
    "IdempotencyStore",
    "PreparedRun",
    "ResumeError",
    "RunOwner",
    "RunQueue",
    "RunRecords",
    "RunRequest",
    "RunService",
    "ThreadOrder",
    "ThreadPointers",
    "ThreadRunner",
    "TurnInput",
    "__version__",
    "prepare_run",
]

if TYPE_CHECKING:
    from .background import BackgroundRuns
    from .background.order import ThreadOrder
    from .background.records import RunRecords
    from .base.errors import ResumeError
    from .checkpoints.blob_store import BlobCheckpointStorage
    from .checkpoints.codec import CheckpointCodec
    from .checkpoints.store import CheckpointStore
    from .core.held_claim import HeldClaim
    from .core.idempotency import IdempotencyStore
    from .core.resume import PreparedRun, TurnInput, prepare_run
    from .core.run_owner import RunOwner
    from .core.runs import RunRequest, RunService
    from .core.thread_turns import ThreadRunner
    from .storage.run_queue import RunQueue
    from .threads.pointers import ThreadPointers


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'resumable' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
