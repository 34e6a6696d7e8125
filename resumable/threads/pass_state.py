"""Where the housekeeping pass stands (``maintenance/state.json``), and what its last full
pass counted: the live threads on each workflow version.

The touch phase reads each thread's pointer and its recent checkpoints anyway; the head's
ranged read answers with the blob's metadata, which names the workflow and version that wrote
it (``checkpoints/blob_metadata.py``). So counting threads per version costs no storage
operation beyond the pass's own, and ``GET /api/workflows`` reads one record.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from azure.storage.blob.aio import ContainerClient

from ..checkpoints.blob_metadata import workflow_of
from ..checkpoints.info import VERSION_KEY, WORKFLOW_KEY
from ..storage import layout
from ..storage.record_store import RecordStore

PHASES = ("mark", "sweep", "touch", "events", "done")
STATE = "state"


def version_key(metadata: Mapping[str, Any]) -> str:
    """``workflow@version`` as a head's blob metadata names it; ``@`` for one written before
    versions (the catalog reads it as its default workflow's first version)."""
    named = workflow_of(metadata)  # stored percent-encoded: a name may hold any character
    return f"{named.get(WORKFLOW_KEY, '')}@{named.get(VERSION_KEY, '')}"


@dataclass(frozen=True, slots=True)
class PassState:
    """The continuation record: where the current pass stands."""

    VERSION: ClassVar[int] = 1
    phase: str
    token: str | None
    started_at: float
    references: str | None = None  # the blob holding this pass's reference filter
    finished_at: float | None = None
    # The slowest page of this pass so far: a page is started only if one as slow would
    # still end within the invocation's budget.
    slowest: float = 0.0
    # Threads per workflow version (``version_key``) whose heads this pass's touch phase has
    # read so far, and those of the last pass that finished, as of its ``counted_at``.
    counting: dict[str, int] = field(default_factory=dict)
    counted: dict[str, int] | None = None
    counted_at: float | None = None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PassState:
        state = cls(**data)
        if state.phase not in PHASES or any(type(n) not in (int, float) for n in (state.started_at, state.slowest)):
            raise ValueError("not a housekeeping state")
        for value in (state.token, state.references):
            if value is not None and not isinstance(value, str):
                raise TypeError("token and references are strings")
        for counts in (state.counting, state.counted or {}):
            if not isinstance(counts, dict) or any(type(n) is not int for n in counts.values()):
                raise TypeError("counts are {version: int}")
        return state

    def next_pass(self) -> PassState:
        """A new pass from the mark phase, keeping the last finished pass's counts."""
        return PassState("mark", None, time.time(), counted=self.counted, counted_at=self.counted_at)

    def counted_heads(self, found: Counter[str]) -> PassState:
        """Heads counted on a touch page added in."""
        return dataclasses.replace(self, counting=dict(Counter(self.counting) + found))

    def after_page(self, token: str | None, seconds: float) -> PassState:
        slowest = max(self.slowest, seconds)
        if token is not None:
            return dataclasses.replace(self, token=token, slowest=slowest)
        phase = PHASES[PHASES.index(self.phase) + 1]
        if phase != "done":
            return dataclasses.replace(self, phase=phase, token=None, slowest=slowest)
        now = time.time()
        return dataclasses.replace(
            self,
            phase=phase,
            token=None,
            finished_at=now,
            slowest=slowest,
            counting={},
            counted=self.counting,
            counted_at=now,
        )


async def live_threads(container: ContainerClient) -> tuple[dict[str, int], float] | None:
    """The last finished pass's threads per ``version_key``, and when it finished; None
    before a pass has finished. One read."""
    stored = await RecordStore(container, layout.MAINTENANCE, PassState).get(STATE)
    if stored is None or stored.value.counted is None or stored.value.counted_at is None:
        return None
    return dict(stored.value.counted), stored.value.counted_at
