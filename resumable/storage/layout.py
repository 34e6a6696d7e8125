"""Where everything lives in the checkpoint container: one prefix per kind of blob.

Every module that names a blob, and everything that must agree with them (the sweep,
thread deletion, the Bicep lifecycle rules and their tests), takes the names from here,
so a rename in one place cannot leave another kind growing forever or deleted by mistake.

* ``checkpoints/<checkpoint_id>.json``: immutable, create-only checkpoints.
* ``threads/<thread_id>.json``: a thread's pointer to its head checkpoint.
* ``thread-meta/<thread_id>.json``: a thread's metadata (channel or ticket IDs).
* ``idempotency/<sha256>.json``: one record per Idempotency-Key or webhook-id.
* ``runs/<run_id>.json``: a background run's record; ``runs/<run_id>/events-<n>.jsonl``
  its attempts' event logs (append blobs); ``runs/<run_id>/progress-<n>.bin`` attempt n's
  newest progress checkpoint (``superstep`` durability), removed when the run ends.
* ``run-order/<thread_id>.json``: a thread's pending background turns, in order.
* ``callbacks/<run_id>.json``: a finished run's completion callback: its delivery state.
* ``maintenance/state.json``: where the timer's housekeeping pass stands (its continuation);
  ``maintenance/references-<n>.bin`` the pass's set of linked checkpoints.
"""

from __future__ import annotations

CHECKPOINTS = "checkpoints/"
THREADS = "threads/"
THREAD_METADATA = "thread-meta/"
IDEMPOTENCY = "idempotency/"
RUNS = "runs/"
RUN_ORDER = "run-order/"
CALLBACKS = "callbacks/"
MAINTENANCE = "maintenance/"

# Kept until idle for the retention period (last access): a live thread never expires.
IDLE_EXPIRY = (CHECKPOINTS, THREADS)
# Kept for a fixed time after their last change.
# The housekeeping record is rewritten by every pass (daily): if the timer stops for longer,
# it goes, and the next pass starts afresh.
MODIFIED_EXPIRY = (IDEMPOTENCY, RUNS, RUN_ORDER, CALLBACKS, MAINTENANCE)
ALL = (CHECKPOINTS, THREADS, THREAD_METADATA, IDEMPOTENCY, RUNS, RUN_ORDER, CALLBACKS, MAINTENANCE)


def record_blob(prefix: str, name: str) -> str:
    """A JSON record's blob name under ``prefix``."""
    return f"{prefix}{name}.json"


def run_events_prefix(run_id: str) -> str:
    """Where a background run's event logs live (deleted with the run)."""
    return f"{RUNS}{run_id}/"


def run_events_blob(run_id: str, attempt: int) -> str:
    return f"{run_events_prefix(run_id)}events-{attempt}.jsonl"


def run_progress_blob(run_id: str, attempt: int) -> str:
    """Attempt ``attempt``'s progress checkpoint (one per attempt, replaced each superstep)."""
    return f"{run_events_prefix(run_id)}progress-{attempt}.bin"


def is_run_progress(name: str) -> bool:
    return name.startswith(RUNS) and "/progress-" in name
