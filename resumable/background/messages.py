"""What a run-queue message says: the run's ID and, for a thread turn its accept left alone
in its thread's pending list, that list's ETag as the accept wrote it.

The ETag saves the thread turn's execution a read (8 blob operations instead of 9). A
drain must know its run is at the front before running it; a run that was the list's
only entry when its accept wrote the list stays the front until it is popped, because
every writer appends at the end and an entry is popped only once its run is finished
(``drain``). So a message that carries the ETag tells the drain what the list was
without a read, and the pop is a delete conditional on that ETag. A list changed since
(a turn appended behind, the entry already popped) costs that pop a conflict and a
re-read, as a stale list costs any compare-and-swap; it never reorders a turn.

The text is ``<run_id>`` or ``<run_id> <etag>``. A plain run ID (a re-sent message that
keeps watch, a message from before this format) is worked as it always was: the drain
reads the list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..base.errors import InvalidRequest
from ..base.ids import validate_id
from ..storage.record_store import Stored
from .order import PendingTurns

# An ETag as the storage service sends it: printable ASCII without spaces, short.
_ETAG = re.compile(r"[\x21-\x7e]{1,100}")


@dataclass(frozen=True, slots=True)
class RunMessage:
    run_id: str
    # The thread's pending list's ETag when the accept left this run its only entry.
    alone: str | None = None

    @classmethod
    def listed(cls, run_id: str, turns: Stored[PendingTurns] | None) -> RunMessage:
        """The message for ``run_id`` after its accept listed it (``turns``: the list as
        the append left it, None for a run on no thread)."""
        if turns is not None and [entry[0] for entry in turns.value.pending] == [run_id]:
            return cls(run_id, turns.etag)
        return cls(run_id)

    def text(self) -> str:
        return self.run_id if self.alone is None else f"{self.run_id} {self.alone}"

    @classmethod
    def parse(cls, text: str) -> RunMessage:
        """``InvalidRequest`` for a text that is not a run message."""
        run_id, _, alone = text.strip().partition(" ")
        if alone and _ETAG.fullmatch(alone) is None:
            raise InvalidRequest("A run message's second part is not an ETag.")
        return cls(validate_id(run_id, kind="run_id"), alone or None)


__all__ = ["RunMessage"]
