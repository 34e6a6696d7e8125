"""Order per thread: a thread's background turns run one at a time, front-first.

The accept appends each turn to the thread's pending list (``ThreadOrder``). Whoever
handles a message for the thread works the list from the front: it runs the front turn
(or, when another delivery holds it, leaves the drain to that one), pops it once it is
finished, and goes on until the list is empty. So turns apply in the order they were
accepted, whatever order their messages arrive in, on however many instances.

Each pop is a compare-and-swap on the list as this drain last read or wrote it, so the
list is read once per drain, not once per turn.

**An entry is removed once its run is finished, whatever the interleaving**, because every
write of an entry is followed by a drain that reaches it: the accept (and a keyed retry
healing it) lists the run before it sends the message, and every message of a thread
turn drains the thread, its run finished or not; a drain that appends its own run works
the list itself. A drain pops the terminal entries it meets at the front, and stops only
behind a front another delivery holds, which drains on. The alternatives were weaker: an
append that refuses a run whose record is terminal reads the record apart from the
list's compare-and-swap, so a drain could still finish the run in between; a drain that
sweeps finished entries only helps if another turn ever comes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ..storage.record_store import Stored
from .order import PendingTurns, ThreadOrder
from .records import RunRecord, RunRecords, lease_live

# Runs one turn (its record as read, the run ID of the message being handled); the record
# afterwards, None when it is gone.
RunTurn = Callable[[Stored[RunRecord], str], Awaitable[Stored[RunRecord] | None]]
# Told about each finished turn as it is popped (again after a crash: idempotent).
Finished = Callable[[Stored[RunRecord]], Awaitable[None]]


class RecordNotReady(Exception):
    """A run's record is not visible yet (or its outcome could not be written): the
    delivery should be retried."""


class ThreadDrain:
    def __init__(
        self, records: RunRecords, order: ThreadOrder, run: RunTurn, finished: Finished, *, met: Finished | None = None
    ) -> None:
        """``met``: told about a turn found already finished (not run by this drain: a crash
        after its outcome, a cancel while queued), before it is reported and popped."""
        self._records = records
        self._order = order
        self._run = run
        self._finished = finished
        self._met = met

    async def drain(self, thread_id: str, mine: Stored[RunRecord], *, alone: str | None = None) -> None:
        """Work ``thread_id``'s pending turns front-first until none is left.

        Stops early when another delivery holds the front (it drains on; a delayed
        message for ``mine`` keeps watch in case it dies). ``alone``: the list's ETag
        when ``mine``'s accept left it the only entry (``RunMessage``): no read needed.
        """
        run_id = mine.value.run_id
        if mine.value.terminal or lease_live(mine):
            turns = await self._order.read(thread_id)
        elif alone is not None:
            # Its accept left it alone in the list: it is the front until popped. Should
            # the list have changed since, the pop's compare-and-swap meets it and reads.
            turns = self._order.left_alone(run_id, alone)
        else:
            # Listed at accept, before its message; appending again is a no-op (one
            # read). Should another drain have popped it since ``mine`` was read, the
            # loop below meets it finished and pops it again.
            turns = await self._order.append(thread_id, run_id)
        while turns is not None and turns.value.pending:
            front_id, _ = turns.value.pending[0]
            front = mine if front_id == run_id else await self._records.get(front_id)
            if front is None:
                # The accept writes a run's record before its entry, so an entry without
                # one was left by a run since deleted: it holds nothing up.
                turns = await self._pop(thread_id, front_id, turns)
                continue
            if not front.value.terminal:
                front = await self._run(front, run_id)
                if front is None or not front.value.terminal:
                    return
            elif self._met is not None:
                await self._met(front)
            await self._finished(front)
            turns = await self._pop(thread_id, front_id, turns)

    async def _pop(self, thread_id: str, run_id: str, turns: Stored[PendingTurns]) -> Stored[PendingTurns] | None:
        return await self._order.remove(thread_id, run_id, current=turns)


__all__ = ["RecordNotReady", "ThreadDrain"]
