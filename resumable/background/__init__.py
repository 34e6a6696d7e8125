"""Background runs: execute a queued run once, whatever the queue and the instances do.

A queue delivers each message at least once and instances crash, so every delivery is
made safe to act on. The pieces, one module each:

* **Records** (``run_schema``, ``run_records``): one typed record per run, changed only by
  compare-and-swap through ``RecordStore``, which tells a lost answer from a conflict.
* **Claim** (``run_executor``): a delivery takes the run's lease by compare-and-swap; of two
  deliveries at once one wins and the other finds a live lease and leaves (re-sending its
  message, delayed until the lease could have lapsed). Whether a lease lapsed is judged on
  the storage service's clock (the record's Last-Modified and the answer's Date), never
  on one instance's clock against another's.
* **Lease** (``run_lease``): the attempt's hold, a ``Claim`` (``claim``) that ``RunOwner``
  settles like an Idempotency-Key claim; watched every second for a cancel or a takeover,
  renewed every 15 s, in a state (``LeaseState``) rather than flags.
* **Commit once** (``commit_check``): before committing, an attempt writes what it is
  about to commit into the record (its commit point). The commit itself is create-only (a
  run's checkpoint is named after the run) or a thread pointer's compare-and-swap. Any
  later attempt first checks whether an earlier one committed and reports that result;
  an end that says "nothing was committed" waits until no intent can still land.
* **Order per thread** (``thread_drain``): a thread's turns run front-first from its
  pending list (``thread_order``).
* **Events** (``events``, ``follow``): batched into a per-attempt log and the
  record's outcome write; ``follow`` replays and tails them for joiners.
* **Progress** (``run_progress``, ``superstep`` durability): after each superstep, the
  attempt's own progress blob (create, then If-Match replaces; no record write), never a
  move of the thread's head. An attempt that claims a run goes on from the newest earlier
  progress of the same base, with no new input; its predecessor's lease lapsed, so that one
  can no longer commit. A failed save stops the run at the boundary (the framework swallows
  it); an attempt past its time budget hands the run on (``Ending.HANDED_ON``, re-enqueued).
  A log holds back events past the last progress, so no event is shown twice.

Public here (``docs/library-api.md``): the names in ``__all__``, each imported on first use
(a host's first background route or trigger pays for the queue SDK, not its cold start).
"""

from __future__ import annotations

from ..base.lazy_exports import lazy_exports

_EXPORTS = {
    "AcceptRequest": "accept",
    "Accepted": "accept",
    "BackgroundRuns": "executor",
    "Callback": "accept",
    "CallbackDeliveries": "callbacks",
    "CallbackDelivery": "callback_records",
    "CommitCheck": "commit_check",
    "CommitIntent": "records",
    "Dedupe": "accept",
    "Ending": "lease",
    "EventReader": "events",
    "LEASE_SECONDS": "lease",
    "LeaseState": "lease",
    "LoggedEvent": "events",
    "MAX_ATTEMPTS": "executor",
    "RECORD_WAIT_SECONDS": "executor",
    "RENEW_SECONDS": "lease",
    "RecordNotReady": "executor",
    "RenderAccepted": "accept",
    "RetryPolicy": "callbacks",
    "RunAcceptor": "accept",
    "RunControl": "control",
    "RunLease": "lease",
    "RunMessage": "messages",
    "RunQueue": "..storage.run_queue",
    "RunRecord": "records",
    "RunRecordView": "finished_run",
    "RunRecords": "records",
    "Sender": "callbacks",
    "TERMINAL_EVENTS": "follow",
    "ThreadOrder": "order",
    "WATCH_SECONDS": "lease",
    "callback_store": "callback_records",
    "delete_finished_run": "run_delete",
    "may_still_land": "commit_check",
    "owned_record": "run_access",
    "owned_run": "run_access",
    "terminal_event": "follow",
}
__all__ = [
    "LEASE_SECONDS",
    "MAX_ATTEMPTS",
    "RECORD_WAIT_SECONDS",
    "RENEW_SECONDS",
    "TERMINAL_EVENTS",
    "WATCH_SECONDS",
    "AcceptRequest",
    "Accepted",
    "BackgroundRuns",
    "Callback",
    "CallbackDeliveries",
    "CallbackDelivery",
    "CommitCheck",
    "CommitIntent",
    "Dedupe",
    "Ending",
    "EventReader",
    "LeaseState",
    "LoggedEvent",
    "RecordNotReady",
    "RenderAccepted",
    "RetryPolicy",
    "RunAcceptor",
    "RunControl",
    "RunLease",
    "RunMessage",
    "RunQueue",
    "RunRecord",
    "RunRecordView",
    "RunRecords",
    "Sender",
    "ThreadOrder",
    "callback_store",
    "delete_finished_run",
    "may_still_land",
    "owned_record",
    "owned_run",
    "terminal_event",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
