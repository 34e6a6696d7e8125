"""Housekeeping run by the timer function: remove checkpoints no thread can reach, and
keep each thread's recent lineage from ageing out."""

from __future__ import annotations

import logging

from resumable.thread_admin import touch_recent_lineage
from resumable.thread_sweep import sweep_orphans

from .wiring import build_service, load_settings

logger = logging.getLogger(__name__)

# Safety does not depend on this (the sweep fences a thread before deleting), but a turn
# still between saving its checkpoint and moving its thread would lose its race to the
# fence: an hour is far past any turn (HTTP requests end at 230 s), so live turns never do.
ORPHAN_MIN_AGE_SECONDS = 3600


async def sweep() -> list[str]:
    """Delete thread checkpoints that lost their race and were not cleaned up at once."""
    service = build_service(load_settings())
    deleted = await sweep_orphans(service.pointers, service.store, older_than_seconds=ORPHAN_MIN_AGE_SECONDS)
    logger.info("orphan sweep finished", extra={"deleted": len(deleted)})
    # Retention goes by last access; turns read only the head. Reading the recent lineage
    # daily keeps what a live thread may fork from (the last ten) out of its reach.
    touched = await touch_recent_lineage(service.store.container, service.pointers)
    logger.info("recent lineage touched", extra={"touched": touched})
    return deleted
