"""Resume Agent Framework workflows from checkpoints in Azure Blob Storage, in one run.

The library layer: it knows Agent Framework and Blob Storage, and nothing of HTTP or
Azure Functions (``functions_adapter`` is the Functions host). Any async Python host
can use it: a FastAPI app, a queue worker, a script.

* ``prepare_run(workflow, checkpoint, TurnInput(...))``: validate and hydrate, run
  nothing; the ``PreparedRun``'s ``events()`` run it once, ``final_checkpoint()`` is
  what to save. The upstream v2 ``Workflow.run(checkpoint=...)`` (agent-framework
  #8522) would replace the hydrate step inside ``resume``/``af_internals`` only.
* ``BlobCheckpointStorage`` (+ ``CheckpointCodec``): create-only checkpoint blobs with a
  guarded decoder; also the framework's ``CheckpointStorage`` protocol.
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

__version__ = "0.1.0"

# Name -> defining module, imported on first use (PEP 562): ``from resumable.ids import
# validate_id`` must not pay for background runs, threads and the queue SDK at cold start.
_EXPORTS = {
    "BackgroundRuns": "background",
    "BlobCheckpointStorage": "blob_store",
    "CheckpointCodec": "checkpoint_codec",
    "HeldClaim": "held_claim",
    "IdempotencyStore": "idempotency",
    "PreparedRun": "resume",
    "ResumeError": "errors",
    "RunOwner": "run_owner",
    "RunQueue": "run_queue",
    "RunRecords": "run_records",
    "RunRequest": "runs",
    "RunService": "runs",
    "ThreadOrder": "thread_order",
    "ThreadPointers": "threads",
    "ThreadRunner": "thread_runs",
    "TurnInput": "resume",
    "prepare_run": "resume",
}
__all__ = [
    "BackgroundRuns",
    "BlobCheckpointStorage",
    "CheckpointCodec",
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
    from .blob_store import BlobCheckpointStorage
    from .checkpoint_codec import CheckpointCodec
    from .errors import ResumeError
    from .held_claim import HeldClaim
    from .idempotency import IdempotencyStore
    from .resume import PreparedRun, TurnInput, prepare_run
    from .run_owner import RunOwner
    from .run_queue import RunQueue
    from .run_records import RunRecords
    from .runs import RunRequest, RunService
    from .thread_order import ThreadOrder
    from .thread_runs import ThreadRunner
    from .threads import ThreadPointers


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'resumable' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
