"""The run queue's triggers: execute a queued run, deliver a callback, settle a poisoned run.

Everything here is wiring: the library (``resumable.background``) decides what a
delivery does; this module builds it from the settings and the one turn factory.
"""

from __future__ import annotations

import logging
from typing import Any

import azure.functions as func

from functions_adapter import callbacks
from functions_adapter.settings import Settings
from functions_adapter.turns import Turn, build_turn
from functions_adapter.wiring import build_service, container_for, load_settings
from resumable.background import BackgroundRuns, RunMessage, RunRecord
from resumable.base import InvalidRequest, ServerMisconfigured
from resumable.storage.run_queue import RunQueue

logger = logging.getLogger(__name__)


def run_queue(settings: Settings) -> RunQueue:
    if settings.queue is None:
        logger.error("Configuration error: background runs need AzureWebJobsStorage (or __queueServiceUri)")
        raise ServerMisconfigured()
    return RunQueue(settings.queue, settings.runs_queue)


def parse_record(settings: Settings) -> Any:
    """How the queue trigger rebuilds a run's turn from its record: the one turn factory."""

    def parse(record: RunRecord) -> Turn:
        service = build_service(settings)
        return build_turn(
            settings,
            service,
            record.body,
            thread_id=record.thread_id,
            background_run_id=record.run_id,
            origin=record.origin,
        )

    return parse


def callbacks_for(settings: Settings) -> callbacks.Callbacks:
    return callbacks.Callbacks(container_for(settings), run_queue(settings), settings)


def background_runs(settings: Settings) -> BackgroundRuns:
    queue = run_queue(settings)
    return BackgroundRuns(
        container_for(settings),
        build_service(settings),
        parse_record(settings),
        lambda run_id, delay: queue.enqueue(run_id, delay_seconds=delay),
        on_finished=callbacks_for(settings).schedule,
        budget_seconds=settings.run_budget_seconds,
    )


def _run_message(message: func.QueueMessage) -> RunMessage | None:
    text = message.get_body().decode("utf-8", "replace")
    try:
        return RunMessage.parse(text)
    except InvalidRequest:
        logger.error("Dropped a run-queue message that is not a run ID")
        return None


async def handle_message(message: func.QueueMessage) -> None:
    """The queue trigger: run (or settle) the run the message names. Raises to retry."""
    parsed = _run_message(message)
    if parsed is None:
        return
    run_id, settings = parsed.run_id, load_settings()
    if run_id.startswith(callbacks.MESSAGE_PREFIX):
        await callbacks_for(settings).deliver(run_id.removeprefix(callbacks.MESSAGE_PREFIX), message.id)
    else:
        await background_runs(settings).handle(run_id, alone=parsed.alone)


async def handle_poisoned(message: func.QueueMessage) -> None:
    """The poison queue: the run's message was delivered ``maxDequeueCount`` times."""
    parsed = _run_message(message)
    if parsed is None:
        return
    run_id = parsed.run_id
    if run_id.startswith(callbacks.MESSAGE_PREFIX):  # settled as given up, never left pending
        await callbacks_for(load_settings()).settle_poisoned(run_id.removeprefix(callbacks.MESSAGE_PREFIX))
        return
    logger.error("Run %s used up its queue deliveries", run_id)
    await background_runs(load_settings()).handle_poisoned(run_id)
