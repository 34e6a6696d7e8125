"""A run's record read by its caller: a background run, or a stored response, answers only
the origin that started it (``threads.ownership`` says why the check lives where the read is).

The record's origin is the one its turn carried, so for a run on a thread it is the thread's
origin as well: a run record never shows another origin's thread.
"""

from __future__ import annotations

from ..storage.record_store import Stored
from ..threads.ownership import Caller, refuse_unless_run_owner
from .control import RunControl
from .records import RunRecord, RunRecords


async def owned_run(control: RunControl, run_id: str, caller: Caller) -> Stored[RunRecord]:
    """The run's record (``RunNotFound`` if none), if ``caller`` started it (else ``Forbidden``)."""
    found = await control.get(run_id)
    refuse_unless_run_owner(found.value.origin, caller)
    return found


async def owned_record(records: RunRecords, run_id: str, caller: Caller) -> Stored[RunRecord] | None:
    """The record as stored (None if there is none), if ``caller`` started its run (else
    ``Forbidden``), before anything settles or shows it."""
    found = await records.get(run_id)
    if found is not None:
        refuse_unless_run_owner(found.value.origin, caller)
    return found
