"""One call, end to end: load → resume → save, as JSON or as an event stream.

Knows nothing about HTTP: ``http_api`` turns requests into ``RunRequest`` and the
results (or ``ResumeError``) into responses.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any, Protocol

from agent_framework import Workflow, WorkflowCheckpoint, WorkflowEvent

from .atomic_resume import ResumedRun, prepare_resume
from .blob_store import BlobCheckpointStorage
from .errors import ResumeError, ThreadBusy, WorkflowFailed
from .run_request import RunRequest
from .run_result import ResultCollector
from .threads import ThreadHead, ThreadPointers
from .tracing import RequestScope, within

logger = logging.getLogger(__name__)

# (event name, data) pairs; ``sse.sse_event`` frames them.
Event = tuple[str, dict[str, Any]]


class WorkflowSource(Protocol):
    """Anything that builds a fresh workflow per call (``workflows.WorkflowSpec`` does)."""

    def build(self) -> Workflow: ...


class Runner(Protocol):
    """Runs one call: ``RunService`` for /api/runs, ``ThreadRunner`` for a thread's turns."""

    async def run_to_json(self, request: RunRequest) -> dict[str, Any]: ...

    async def open_stream(self, request: RunRequest) -> AsyncIterator[Event]: ...


class RunService:
    def __init__(self, store: BlobCheckpointStorage, spec: WorkflowSource, pointers: ThreadPointers) -> None:
        self.store = store
        self.spec = spec
        self.pointers = pointers

    async def _prepare(self, request: RunRequest) -> ResumedRun:
        """Load and validate the checkpoint and hydrate a fresh workflow; run nothing."""
        checkpoint: WorkflowCheckpoint | None = None
        if request.checkpoint_id is not None:
            checkpoint = await self.store.load(request.checkpoint_id)
        return await prepare_resume(self.spec.build(), checkpoint, request.turn, stream=request.stream)

    async def _save(self, run: ResumedRun, collector: ResultCollector, head: ThreadHead | None) -> dict[str, Any]:
        """Persist the final checkpoint; for a thread turn, then advance the pointer.

        A turn that loses the pointer race deletes its checkpoint (best effort) and
        raises ``ThreadBusy``; nothing it did remains visible.
        """
        saved = await run.final_checkpoint()
        await self.store.save(saved, thread_id=head.thread_id if head else None)
        if head is not None:
            try:
                await self.pointers.advance(head, saved.checkpoint_id)
            except ThreadBusy:
                try:
                    await self.store.delete(saved.checkpoint_id)
                except ResumeError:
                    logger.warning("Could not delete orphan checkpoint %s", saved.checkpoint_id)
                raise
        return collector.body(saved)

    async def run_to_json(self, request: RunRequest, *, head: ThreadHead | None = None) -> dict[str, Any]:
        """Run the call to completion and return the response body."""
        run = await self._prepare(request)
        collector = ResultCollector()
        async with aclosing(run.events()) as events:
            async for event in events:
                collector.add(event)
        return await self._save(run, collector, head)

    async def open_stream(self, request: RunRequest, *, head: ThreadHead | None = None) -> AsyncIterator[Event]:
        """Validate, hydrate and start the run, then return its events.

        Everything that can be refused (bad checkpoint, bad input, the framework's own
        pre-run checks) is decided before this returns, so it still becomes a plain
        HTTP error. Failures after that arrive as an ``error`` event.
        """
        run = await self._prepare(request)
        events = run.events()
        try:
            first = await anext(events)  # the run's `started` event: pre-run checks passed
        except BaseException:
            await events.aclose()
            raise
        # The stream is drained later, outside this request's context: keep it for the save.
        return self._stream(run, first, events, head, RequestScope.capture())

    async def _stream(
        self,
        run: ResumedRun,
        first: WorkflowEvent,
        events: AsyncIterator[WorkflowEvent],
        head: ThreadHead | None,
        request_scope: RequestScope,
    ) -> AsyncIterator[Event]:
        collector = ResultCollector()
        try:
            async with aclosing(events):  # type: ignore[type-var]
                collector.add(first)
                async for event in events:
                    item = collector.add(event)
                    if item is not None:
                        yield item
            with within(request_scope):
                body = await self._save(run, collector, head)
            yield "done", body
        except ResumeError as exc:
            yield "error", exc.to_body()
        except Exception:
            logger.exception("Streaming run failed")
            yield "error", WorkflowFailed("The workflow run failed; nothing was saved.").to_body()
