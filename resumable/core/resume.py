"""Resume a workflow from a checkpoint and apply new input in one run.

``run(message=..., checkpoint_id=...)`` is refused by Agent Framework 1.23.0
(upstream issue #7863). This module gets the same effect without patching the
library:

1. validate the checkpoint against the workflow (name, graph signature, pending
   work) before anything executes;
2. hydrate the workflow from it (``af_internals.hydrate``), which emits no events;
3. call the public ``workflow.run(...)`` once, with a per-call in-memory checkpoint
   storage, so there is one ``started`` event and one workflow span;
4. hand back the run's last checkpoint, re-parented onto the checkpoint the call
   resumed from, for the caller to persist.

Any failure in steps 1-2 raises a typed ``ResumeError`` and the input never runs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from agent_framework import Message, Workflow, WorkflowCheckpoint, WorkflowEvent
from agent_framework.exceptions import WorkflowCheckpointException

from ..base.boundary import release_frames
from ..base.errors import (
    CheckpointHasInFlightWork,
    CheckpointIncompatible,
    InvalidRequest,
    NoNewMessages,
    PendingRequestsOutstanding,
    ResumeError,
    WorkflowFailed,
)
from ..checkpoints import af_internals
from ..checkpoints.codec import CheckpointCodec
from ..checkpoints.info import checkpoint_status
from ..threads.transcript import recorded_input_ids
from .results import ResultCollector

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TurnInput:
    """What one call applies: new messages, answers to pending requests, or neither
    (which continues whatever the checkpoint left pending)."""

    messages: list[Message] | None = None
    responses: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.messages is not None and self.responses is not None:
            raise InvalidRequest("Send either 'messages' or 'responses', not both.")


def unseen_input(turn: TurnInput, resent: Sequence[Message], checkpoint: WorkflowCheckpoint | None) -> TurnInput:
    """The turn a resent conversation makes: its messages the checkpoint's turn did not record.

    A client that sends its whole conversation each call (AG-UI) sends again what the last
    turn applied, or what a paused turn is waiting on. Deciding it here, on the checkpoint the
    turn resumes from, costs no read beyond the turn's own. ``NoNewMessages`` (nothing runs)
    when nothing is new and nothing is answered; answers with new messages are refused.
    """
    seen = recorded_input_ids(checkpoint.metadata) if checkpoint is not None else frozenset()
    new = [m for m in resent if m.message_id not in seen]
    if turn.responses is not None:
        if new:
            raise InvalidRequest(
                "Answer the pending requests first, then send new messages.",
                details={"message_ids": [m.message_id for m in new]},
            )
        return turn
    if not new:
        raise NoNewMessages("Every message sent is already in the thread; nothing was run.")
    return TurnInput(messages=new)


def validate_checkpoint(workflow: Workflow, checkpoint: WorkflowCheckpoint, turn: TurnInput) -> TurnInput:
    """Refuse a checkpoint this workflow cannot safely continue with this input.

    Answers themselves are checked after hydration (``prepare_run``), by the
    framework's own pre-run check.
    """
    if checkpoint.workflow_name != workflow.name:
        raise CheckpointIncompatible(
            f"The checkpoint belongs to workflow '{checkpoint.workflow_name}', not '{workflow.name}'."
        )
    if checkpoint.graph_signature_hash != workflow.graph_signature_hash:
        raise CheckpointIncompatible(
            "The workflow's graph (executors or edges) has changed since the checkpoint was taken."
        )
    status = checkpoint_status(checkpoint)
    pending = sorted(checkpoint.pending_request_info_events)
    if turn.messages is not None:
        if status == "in_flight":
            raise CheckpointHasInFlightWork(
                "The checkpoint was taken mid-run and still has undelivered messages; "
                "resume it without new messages first."
            )
        if pending:
            raise PendingRequestsOutstanding(
                "The checkpoint has unanswered requests; answer them with 'responses' before sending messages.",
                details={"pending_request_ids": pending},
            )
    if turn.responses is not None:
        if not pending:
            raise InvalidRequest("The checkpoint has no pending requests to answer.")
        unknown = sorted(set(turn.responses) - set(pending))
        if unknown:
            raise InvalidRequest(
                "'responses' names requests that are not pending in this checkpoint.",
                details={"unknown_request_ids": unknown, "pending_request_ids": pending},
            )
    return turn


class RunCheckpoints:
    """The run's own checkpoint storage: one call's supersteps, in memory, never copied.

    The framework's ``InMemoryCheckpointStorage`` deep-copies each checkpoint on save and
    again on load, on the event loop: for a 1 MB conversation of messages that is tens of
    ms per superstep. Nothing here changes a saved checkpoint but ``final_checkpoint``'s
    re-parenting, and only the framework and ``PreparedRun`` ever see them. A run's
    checkpoints hold its executors' state by reference (``af_internals.share_executor_states``:
    no copies per superstep), so an intermediate one is not a snapshot: nothing reads one,
    and the final one is read only once the run ended, when nothing changes its state.
    """

    def __init__(self) -> None:
        self._saved: dict[str, WorkflowCheckpoint] = {}

    async def save(self, checkpoint: WorkflowCheckpoint) -> str:
        self._saved[checkpoint.checkpoint_id] = checkpoint
        # The framework saves after every superstep, and nothing else in a run whose
        # executors do no I/O suspends: yield here, or a burst of such runs (from a warm
        # cache, nothing else waits either) holds the event loop for all of them at once.
        await asyncio.sleep(0)
        return checkpoint.checkpoint_id

    async def load(self, checkpoint_id: str) -> WorkflowCheckpoint:
        try:
            return self._saved[checkpoint_id]
        except KeyError:
            raise WorkflowCheckpointException(f"No checkpoint found with ID {checkpoint_id}") from None

    async def list_checkpoints(self, *, workflow_name: str) -> list[WorkflowCheckpoint]:
        return [c for c in self._saved.values() if c.workflow_name == workflow_name]

    async def delete(self, checkpoint_id: str) -> bool:
        return self._saved.pop(checkpoint_id, None) is not None

    async def get_latest(self, *, workflow_name: str) -> WorkflowCheckpoint | None:
        mine = await self.list_checkpoints(workflow_name=workflow_name)
        return mine[-1] if mine else None

    async def list_checkpoint_ids(self, *, workflow_name: str) -> list[str]:
        return [c.checkpoint_id for c in await self.list_checkpoints(workflow_name=workflow_name)]


@dataclass(frozen=True, slots=True)
class Continuation:
    """Where a background turn goes on from after a crash or a hand-on: a progress checkpoint
    of its own run (its input already applied) and what the run had produced up to it."""

    checkpoint: WorkflowCheckpoint
    produced: Mapping[str, Any]


class Progress(Protocol):
    """A background attempt's progress checkpoints (``background.progress.RunProgress``)."""

    async def load(self, codec: CheckpointCodec, base: str | None, workflow: Workflow) -> Continuation | None:
        """The newest progress of this run that continues from ``base`` (the checkpoint the
        turn resumed from) and fits ``workflow`` (a deploy between attempts may change its
        graph: the turn then starts over), if any."""
        ...

    async def save(self, checkpoint: WorkflowCheckpoint, produced: Mapping[str, Any], codec: CheckpointCodec) -> None:
        """Save a superstep's checkpoint. Never raises: a failure is kept for ``stop_reason``
        (the framework would swallow it and go on)."""
        ...

    def stop_reason(self) -> ResumeError | None:
        """Why the run must stop at this superstep boundary (a failed save, a hand-on), if it must."""
        ...


class ProgressCheckpoints(RunCheckpoints):
    """The run's storage under ``superstep`` durability: each superstep's checkpoint also goes
    to ``progress``, except the entry checkpoint (the input, not progress) and a checkpoint
    with nothing in flight (the run ends there and commits it as its turn)."""

    def __init__(self, progress: Progress, codec: CheckpointCodec, start: int, collector: ResultCollector) -> None:
        super().__init__()
        self._progress = progress
        self._codec = codec
        self._start = start
        self._collector = collector

    async def save(self, checkpoint: WorkflowCheckpoint) -> str:
        await super().save(checkpoint)
        if checkpoint.iteration_count > self._start and checkpoint_status(checkpoint) == "in_flight":
            await self._progress.save(checkpoint, self._collector.snapshot(), self._codec)
        return checkpoint.checkpoint_id


@dataclass
class PreparedRun:
    """A validated, hydrated workflow, ready to run exactly once."""

    workflow: Workflow
    turn: TurnInput
    resumed_from: WorkflowCheckpoint | None
    stream: bool
    # The workflow and version that run it (``catalog.LoadedVersion.stamp``): its checkpoint records them.
    stamp: Mapping[str, Any] = field(default_factory=dict)
    # A progress checkpoint of this very turn to go on from (its input is in it), else None.
    continued_from: WorkflowCheckpoint | None = None
    # What the run produced (outputs, messages), from its start: carried across a continuation.
    collector: ResultCollector = field(default_factory=ResultCollector)
    _storage: RunCheckpoints = field(default_factory=RunCheckpoints)
    _progress: Progress | None = None
    _completed: bool = False

    def save_progress(self, progress: Progress, codec: CheckpointCodec) -> None:
        """Save a progress checkpoint after each superstep (``superstep`` durability)."""
        restored = self.continued_from or (self.resumed_from if self.turn.messages is None else None)
        start = restored.iteration_count if restored is not None else 0
        self._storage = ProgressCheckpoints(progress, codec, start, self.collector)
        self._progress = progress

    def _start(self) -> Any:
        common: dict[str, Any] = {"stream": self.stream, "checkpoint_storage": self._storage}
        if self.continued_from is not None:  # the input was applied before the progress was saved
            return self.workflow.run(checkpoint_id=self.continued_from.checkpoint_id, **common)
        if self.turn.messages is not None:
            return self.workflow.run(self.turn.messages, **common)
        if self.turn.responses is not None:
            return self.workflow.run(responses=dict(self.turn.responses), **common)
        # Nothing new to apply: let the framework continue the checkpoint's pending
        # work through its own public restore path.
        assert self.resumed_from is not None
        return self.workflow.run(checkpoint_id=self.resumed_from.checkpoint_id, **common)

    async def events(self) -> AsyncIterator[WorkflowEvent]:
        """The run's events; the same path for streaming and collected results.

        Failures raised by the workflow surface as ``WorkflowFailed``; closing this
        iterator early cancels the run, and nothing is persisted for it.
        """
        if self.continued_from is not None:
            await RunCheckpoints.save(self._storage, self.continued_from)
        elif self.resumed_from is not None and self.turn.messages is None and self.turn.responses is None:
            await self._storage.save(self.resumed_from)
        try:
            started = self._start()
            if self.stream:
                async with started as stream:
                    async for event in stream:
                        self._check_boundary()
                        yield event
            else:
                for event in await started:
                    yield event
            self._check_boundary()
        except ResumeError:
            raise
        except Exception as exc:
            logger.exception("Workflow run failed")
            release_frames(exc)  # else the framework's task frames keep this run alive (boundary.py)
            raise WorkflowFailed("The workflow run failed; nothing was saved.") from exc
        self._completed = True

    def _check_boundary(self) -> None:
        """Stop at a superstep boundary whose progress save failed, or where the attempt hands on."""
        reason = self._progress.stop_reason() if self._progress is not None else None
        if reason is not None:
            raise reason

    async def final_checkpoint(self) -> WorkflowCheckpoint:
        """The run's last checkpoint, parented on the one this call resumed from.

        Only a run that finished (idle, or waiting on requests) yields one: a run
        that was cancelled, failed, or stopped mid-superstep is never persisted.
        """
        last_id = self.workflow.get_last_checkpoint_id()
        if not self._completed or last_id is None:
            raise WorkflowFailed("The workflow run did not complete; nothing was saved.")
        checkpoint = await self._storage.load(last_id)
        if checkpoint_status(checkpoint) == "in_flight":
            raise WorkflowFailed("The workflow run stopped with work in flight; nothing was saved.")
        checkpoint.previous_checkpoint_id = self.resumed_from.checkpoint_id if self.resumed_from else None
        if self.stamp:
            checkpoint.metadata = {**checkpoint.metadata, **self.stamp}
        return checkpoint


async def prepare_run(
    workflow: Workflow,
    checkpoint: WorkflowCheckpoint | None,
    turn: TurnInput,
    *,
    stream: bool = False,
) -> PreparedRun:
    """Validate and hydrate; raise a typed error, having executed nothing, if either fails."""
    if checkpoint is None:
        if turn.messages is None:
            raise InvalidRequest("Send 'messages' to start a new run, or a 'checkpoint_id' to resume one.")
        return PreparedRun(workflow, turn, None, stream)
    turn = validate_checkpoint(workflow, checkpoint, turn)
    try:
        await af_internals.hydrate(workflow, checkpoint)
    except Exception as exc:
        logger.warning("Restoring checkpoint %s failed: %r", checkpoint.checkpoint_id, exc)
        raise CheckpointIncompatible("The checkpoint could not be restored into this workflow.") from exc
    if turn.messages is not None and await af_internals.has_in_flight_messages(workflow):
        raise CheckpointHasInFlightWork("The restored checkpoint still has undelivered messages.")
    if turn.responses is not None:
        turn = TurnInput(responses=await _checked_responses(workflow, checkpoint, turn.responses))
    return PreparedRun(workflow, turn, checkpoint, stream)


def fits(workflow: Workflow, checkpoint: WorkflowCheckpoint) -> bool:
    """Whether ``checkpoint`` was taken by this workflow's name and graph."""
    return (
        checkpoint.workflow_name == workflow.name and checkpoint.graph_signature_hash == workflow.graph_signature_hash
    )


async def continue_run(
    workflow: Workflow,
    resumed_from: WorkflowCheckpoint | None,
    turn: TurnInput,
    continuation: Continuation,
    *,
    stream: bool = False,
) -> PreparedRun:
    """Hydrate a progress checkpoint of this turn, to go on with no new input: ``turn`` (the
    input it already applied) and ``resumed_from`` are kept for what the commit records."""
    checkpoint = continuation.checkpoint
    if not fits(workflow, checkpoint):
        raise CheckpointIncompatible("The run's progress checkpoint belongs to another workflow or graph.")
    try:
        await af_internals.hydrate(workflow, checkpoint)
    except Exception as exc:
        logger.warning("Restoring progress checkpoint %s failed: %r", checkpoint.checkpoint_id, exc)
        raise CheckpointIncompatible("The run's progress checkpoint could not be restored.") from exc
    run = PreparedRun(workflow, turn, resumed_from, stream, continued_from=checkpoint)
    run.collector.restore(continuation.produced)
    return run


async def _checked_responses(
    workflow: Workflow, checkpoint: WorkflowCheckpoint, responses: Mapping[str, Any]
) -> dict[str, Any]:
    try:
        return await af_internals.validate_responses(workflow, responses)
    except Exception as exc:  # the framework's check raises several types
        logger.info("Refused answers to pending requests: %s", type(exc).__name__)
        expected = {
            request_id: getattr(event.response_type, "__name__", str(event.response_type))
            for request_id, event in checkpoint.pending_request_info_events.items()
            if request_id in responses
        }
        raise InvalidRequest(
            "An answer does not fit the request it answers (wrong type, or for a computer-use call, "
            "another call's result or unacknowledged safety checks).",
            details={"expected_types": expected},
        ) from exc
