"""The one turn factory: how a request body becomes a ``RunRequest`` and the runner that
runs it, for the synchronous route, the background accept and the background execution.

A thread turn's options (fork, ``THREAD_EXPIRED=restart``, the lock wait) come from here
alone, so a turn behaves the same whatever drives it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from functions_adapter.request_body import parse_run_request
from functions_adapter.settings import Settings
from resumable import ThreadRunner
from resumable.core.runs import Runner, RunRequest, RunService


@dataclass(frozen=True, slots=True)
class Turn:
    request: RunRequest
    runner: Runner
    thread_id: str | None


def build_turn(
    settings: Settings,
    service: RunService,
    body: bytes,
    *,
    thread_id: str | None,
    origin: str | None,
    accept: str | None = None,
    background_run_id: str | None = None,
) -> Turn:
    """Parse ``body`` (``InvalidRequest`` if it is not a valid turn) and pick its runner.

    ``background_run_id``: the turn is a background run's execution. It streams its events
    into the run's log; a thread turn waits its turn (``enqueue``) instead of failing on a
    busy thread, and a run without a thread saves under its run ID, so two attempts
    cannot both save.

    ``workflow`` in the body (the Responses ``model``, an MCP argument and AG-UI's
    ``forwardedProps.workflow`` are put there): a workflow this app does not host is
    ``WorkflowNotFound`` (404, listing those it does) before anything is read. Which version
    runs is decided in the turn, on the checkpoint it resumes from (``catalog.choose``).

    ``origin``: who sends the turn (``callers.origin_of``; a background run's record
    keeps it). A thread records its first turn's origin and refuses turns of any other.
    """
    request = parse_run_request(body, accept=accept, limits=settings.limits, thread=thread_id is not None)
    if request.workflow is not None:  # every entry point names a workflow here, checked once
        service.catalog.check(request.workflow)
    request = dataclasses.replace(request, origin=origin)
    if background_run_id is not None:
        request = dataclasses.replace(
            request,
            stream=True,
            multitask="enqueue" if thread_id is not None else request.multitask,
            final_checkpoint_id=None if thread_id is not None else background_run_id,
        )
    if thread_id is None:
        return Turn(request, service, None)
    runner = ThreadRunner(
        service,
        thread_id,
        lock_wait_seconds=settings.thread_lock_wait_seconds,
        restart_expired=settings.thread_expired == "restart",
    )
    return Turn(request, runner, thread_id)
