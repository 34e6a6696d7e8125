"""Housekeeping run by the timer function: remove checkpoints no thread can reach, and
keep each thread's recent lineage from ageing out, a budgeted slice per invocation.

One name for the job; the timer function ``sweep_orphan_checkpoints``, the setting
``MAINTENANCE_SECONDS`` and the ``maintenance/`` blob prefix are its older names, kept
for deployed apps (docs/architecture.md's glossary)."""

from __future__ import annotations

import logging

from functions_adapter.settings import Settings
from functions_adapter.wiring import build_service, load_settings, workflow_catalog
from resumable import RunService
from resumable.threads import Report, run_housekeeping
from resumable.threads.pass_state import live_threads

logger = logging.getLogger(__name__)

# Safety does not depend on this (the sweep fences a thread before deleting), but a turn
# still between saving its checkpoint and moving its thread would lose its race to the
# fence: an hour is far past any turn (HTTP requests end at 230 s), so live turns never do.
ORPHAN_MIN_AGE_SECONDS = 3600


async def run() -> Report:
    """Go on with the daily pass for at most MAINTENANCE_SECONDS: delete thread checkpoints
    that lost their race and were not cleaned up at once, read each thread's recent
    lineage (retention goes by last access; turns read only the head), then delete event
    logs whose run record is gone (a crashed thread delete's leftovers)."""
    settings = load_settings()
    service = build_service(settings)
    report = await run_housekeeping(
        service.store.container,
        service.pointers,
        service.store,
        budget_seconds=settings.housekeeping_seconds,
        orphan_min_age_seconds=ORPHAN_MIN_AGE_SECONDS,
    )
    logger.info(
        "housekeeping",
        extra={
            "phase": report.phase,
            "pass_finished": report.pass_finished,
            "deleted": len(report.deleted),
            "touched": report.touched,
            "logs_deleted": report.logs_deleted,
            "pages": report.pages,
        },
    )
    if report.pass_finished:
        await _warn_unhosted(settings, service)
    return report


async def _warn_unhosted(settings: Settings, service: RunService) -> None:
    """A finished pass that found threads on a version the app no longer hosts says so (their
    turns are refused): one read, once a pass. ``version_check`` refuses such a deploy first."""
    from functions_adapter.workflow_listing import describe  # noqa: PLC0415 - only once a pass ends

    counted = await live_threads(service.store.container)
    unhosted = describe(workflow_catalog(settings), *counted)["unhosted"] if counted else []
    if unhosted:
        named = ", ".join(f"{u['workflow']}@{u['version']} ({u['live_threads']} threads)" for u in unhosted)
        logger.error("Live threads are on workflow versions this app no longer hosts: %s", named)
