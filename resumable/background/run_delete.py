"""Deleting one finished background run: its record, then its event logs.

The record goes first, by compare-and-swap and only while the run is finished, so a run
that is still going is never pulled from under its attempt. Its event logs go after it: a
log's writer reads the record after creating the log (``events.py``), so a log made
meanwhile is removed by one or the other. The logs are best effort: with the record gone
nothing reads them, and housekeeping's sweep (``threads/event_sweep.py``) removes what a
failed call left. The run's checkpoint is not touched; it belongs to its thread or caller.
A thread's DELETE removes its runs itself (``threads/delete.py``), through the same
log deletion.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..base.errors import StorageUnavailable
from ..storage.record_store import DELETE, Stored
from ..threads.event_sweep import delete_run_events
from .records import RunRecord, RunRecords

if TYPE_CHECKING:  # the storage SDK loads on first use, not at import (cold start)
    from azure.storage.blob.aio import ContainerClient

logger = logging.getLogger(__name__)


async def delete_finished_run(container: ContainerClient, found: Stored[RunRecord]) -> bool:
    """Delete the run ``found`` names, record and event logs; False (nothing changed) while
    it has not finished. A run already gone counts as deleted, so a repeat answers True."""
    if not found.value.terminal:
        return False
    run_id = found.value.run_id
    after = await RunRecords(container).update(
        run_id, lambda r: DELETE if r is not None and r.terminal else None, current=found
    )
    if after is not None:  # the change refused it: the record read back is not a finished run
        return False
    try:
        await delete_run_events(container, run_id)
    except StorageUnavailable:
        logger.warning("Could not delete the event logs of run %s; housekeeping removes them", run_id)
    return True


__all__ = ["delete_finished_run"]
