"""Did an earlier attempt of a background run commit, and could one still?

Before it commits, an attempt writes what it is about to commit (a ``CommitIntent``: the
checkpoint ID, its timestamp, the exact response) into the run record, under its lease.
Whoever finds the run unfinished asks ``committed``: an intent whose checkpoint landed
(for a thread turn: is in the thread's lineage) is the run's result.

"Not committed" can be premature: an attempt past its intent may have its save or its
pointer move still in flight (a stalled instance, a request on the wire). Deciding on a
run from that answer is safe when the decision is to run it again, because each commit
is fenced (create-only under the run's ID, or a pointer CAS from the head the attempt
read), so a late write and a new attempt cannot both land. It is not safe when the
decision ends the run as not committed (cancelled, attempts exhausted, poisoned): a late
write would land beside a ``cancelled``. So those decisions wait until no intent can still
land (``may_still_land``): the attempt sends its commit writes right after its intent
write, and each is bounded by the client's timeouts, so ``COMMIT_GRACE_SECONDS`` after
the holder's lease could have lapsed (by the record's Last-Modified, the service's
clock), nothing of it can arrive.
"""

from __future__ import annotations

from ..core.commit_ledger import CommitLedger
from ..storage.record_store import CLOCK_RESOLUTION, Stored
from .schema import CommitIntent, RunRecord

# Well above one commit's writes (a save and a pointer move, each at most three tries of
# a 10 s timeout) plus a stalled loop: past it, an attempt's commit can no longer land.
COMMIT_GRACE_SECONDS = 60.0


class CommitCheck:
    def __init__(self, ledger: CommitLedger) -> None:
        self._ledger = ledger

    async def committed(self, record: RunRecord) -> bytes | None:
        """The response of an attempt of this run that committed, if one did."""
        intent = await self.committed_intent(record)
        return None if intent is None else intent.body

    async def committed_intent(self, record: RunRecord) -> CommitIntent | None:
        """The intent of an attempt of this run that committed, if one did. A run without
        a thread saves every attempt under one derived ID: the attempt whose checkpoint is
        there is the one whose timestamp (``stamp``) it carries."""
        for intent in record.commits:
            if await self._ledger.committed(intent.checkpoint_id, record.thread_id, stamp=intent.stamp):
                return intent
        return None


def may_still_land(stored: Stored[RunRecord]) -> float:
    """Seconds during which an intent of this record that did not commit yet still could
    (0: none can). Call it only after ``committed`` found none; an age that cannot be told
    counts as none, the longest wait."""
    record = stored.value
    if not record.commits or record.terminal:
        return 0.0
    lease = record.lease.seconds if record.lease is not None else 0.0
    window = lease + CLOCK_RESOLUTION + COMMIT_GRACE_SECONDS
    age = stored.age or 0.0
    return max(0.0, window - age)


__all__ = ["COMMIT_GRACE_SECONDS", "CommitCheck", "may_still_land"]
