"""Resume Agent Framework workflows from checkpoints in Azure Blob Storage, in one run.

The library layer: it knows Agent Framework and Blob Storage, and nothing of HTTP or
Azure Functions (``functions_adapter`` is the Functions host). Any async Python host
can use it: a FastAPI app, a queue worker, a script. The public API is this root, plus
``resumable.threads``, ``resumable.background`` and ``resumable.base`` (the error tree):
each package's ``__all__``, described in ``docs/library-api.md``. Other modules are internal.

* ``prepare_run(workflow, checkpoint, TurnInput(...))``: validate and hydrate, run
  nothing; the ``PreparedRun``'s ``events()`` run it once, ``final_checkpoint()`` is
  what to save. The upstream v2 ``Workflow.run(checkpoint=...)`` (agent-framework
  #8522) would replace the hydrate step inside ``resume``/``af_internals`` only.
* ``CheckpointStore``: the narrow store the library needs (save, load, delete, info, a page
  of ``CheckpointInfo``); ``BlobCheckpointStorage`` (+ ``CheckpointCodec``) implements it
  with create-only blobs, a guarded decoder and a warm-instance cache, and is the framework's
  ``CheckpointStorage`` too; ``MemoryCheckpointStore`` is the in-process one.
* ``WorkflowCatalog`` / ``WorkflowRef``: which workflows (and versions) a host serves.
* ``RunService`` / ``ThreadRunner``: load → prepare → run → save (→ advance a thread).
* ``ThreadPointers``: threads as pointer blobs moved by compare-and-swap.
* ``IdempotencyStore``: one run per Idempotency-Key, replayed to every retry.
* ``BackgroundRuns``: queued runs executed at most once per run, whatever the queue
  redelivers.
* ``ResumeError``: the root of every error a caller can see (``resumable.base``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base.lazy_exports import lazy_exports
from .base.version import __version__

# Name -> defining module, imported on first use: ``from resumable.base.ids import
# validate_id`` must not pay for background runs, threads and the queue SDK at cold start.
_EXPORTS = {
    "BackgroundRuns": "background",
    "BlobCheckpointStorage": "checkpoints.blob_store",
    "CheckpointCodec": "checkpoints.codec",
    "CheckpointInfo": "checkpoints.info",
    "CheckpointStore": "checkpoints.store",
    "IdempotencyStore": "core.idempotency",
    "MemoryCheckpointStore": "checkpoints.memory_store",
    "PreparedRun": "core.resume",
    "ResumeError": "base.errors",
    "RunRequest": "core.runs",
    "RunService": "core.runs",
    "ThreadPointers": "threads",
    "ThreadRunner": "core.thread_turns",
    "TurnInput": "core.resume",
    "WorkflowCatalog": "core.catalog",
    "WorkflowRef": "core.catalog",
    "prepare_run": "core.resume",
}
__all__ = [
    "BackgroundRuns",
    "BlobCheckpointStorage",
    "CheckpointCodec",
    "CheckpointInfo",
    "CheckpointStore",
    "IdempotencyStore",
    "MemoryCheckpointStore",
    "PreparedRun",
    "ResumeError",
    "RunRequest",
    "RunService",
    "ThreadPointers",
    "ThreadRunner",
    "TurnInput",
    "WorkflowCatalog",
    "WorkflowRef",
    "__version__",
    "prepare_run",
]

if TYPE_CHECKING:
    from .background import BackgroundRuns
    from .base.errors import ResumeError
    from .checkpoints.blob_store import BlobCheckpointStorage
    from .checkpoints.codec import CheckpointCodec
    from .checkpoints.info import CheckpointInfo
    from .checkpoints.memory_store import MemoryCheckpointStore
    from .checkpoints.store import CheckpointStore
    from .core.catalog import WorkflowCatalog, WorkflowRef
    from .core.idempotency import IdempotencyStore
    from .core.resume import PreparedRun, TurnInput, prepare_run
    from .core.runs import RunRequest, RunService
    from .core.thread_turns import ThreadRunner
    from .threads import ThreadPointers

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
