"""One call, end to end: load → resume → save, as JSON or as an event stream.

Knows nothing about HTTP: ``http_api`` turns requests into ``RunRequest`` and the
results (or ``ResumeError``) into responses.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import AsyncExitStack, aclosing, contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from agent_framework import Message, Workflow, WorkflowCheckpoint, WorkflowEvent

from ..base import strict_json
from ..base.errors import CheckpointInThread, CheckpointNotInThread, ResumeError, WorkflowFailed
from ..base.tracing import RequestScope, within
from ..checkpoints import af_internals
from ..checkpoints.codec import CheckpointCodec
from ..checkpoints.store import CheckpointStore
from ..storage.failures import watching_writes
from ..threads.pointers import ThreadPointers
from ..threads.transcript import TRANSCRIPT, transcript
from .catalog import WorkflowCatalog, WorkflowRef, migrate
from .checkpoint_state import apply_edit, edit_stamp
from .commit_ledger import CommitLedger
from .results import ResultCollector, message_json
from .resume import PreparedRun, Progress, TurnInput, continue_run, prepare_run, unseen_input

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RunRequest:
    """One call: resume from ``checkpoint_id`` (or start), apply ``turn``; ``multitask``
    says what a thread turn does when another turn is running (``reject`` or ``enqueue``)."""

    checkpoint_id: str | None
    turn: TurnInput
    stream: bool
    multitask: str = "reject"
    # Save the result under this ID (create-only) instead of the framework's: a background
    # run names it after itself, so two attempts cannot both save (see ``background``).
    final_checkpoint_id: str | None = None
    # Asked to run in the background (``"background": true``); the adapter answers 202.
    background: bool = False
    # Where a background run's outcome is POSTed when it finishes (checked by the adapter).
    callback_url: str | None = None
    # A thread turn that forks: resume from this checkpoint of the thread's lineage, not its head.
    fork_from: str | None = None
    # The turn started a new thread where an expired one was (reported as ``thread_created``).
    thread_created: bool = False
    # Who sends the turn, as the adapter names it (``api``, ``principal:<id>``, ``slack:<team>``):
    # a thread records its first turn's origin and refuses turns of any other (``Forbidden``).
    origin: str | None = None
    # A client that resends its whole conversation (AG-UI): its input messages, each with its
    # ID. Only those the checkpoint resumed from has not recorded are applied (``unseen_input``).
    resent: tuple[Message, ...] | None = None
    # The workflow (and version) the request names; None: a new run starts on the catalog's
    # default, a resume stays on its checkpoint's (``catalog.WorkflowCatalog.choose``).
    workflow: WorkflowRef | None = None
    # Which events a stream carries: ``outputs`` (outputs and requests), or ``all`` (with each
    # superstep and executor invocation too: ``lifecycle``).
    events: str = "outputs"
    # A fork from edited state: executor ID -> the JSON state it resumes with, in place of the
    # state ``fork_from`` saved (``checkpoint_state.apply_edit``); the new checkpoint is marked.
    state_edit: Mapping[str, dict[str, Any]] | None = None
    # A background turn's durability as asked (``turn``/``superstep``); None: the workflow's default.
    durability: str | None = None
    # A background attempt's progress checkpoints (``background.progress``): used when the
    # turn runs with ``superstep`` durability, to save after each superstep and to continue.
    progress: Progress | None = None


def _sent(message: Message) -> dict[str, str]:
    """A sent message as its turn's transcript records it, with its own ID if it came with one."""
    item = message_json(message)
    return item if message.message_id is None else {**item, "id": message.message_id}


class AfterSave(Protocol):
    """What commits a saved checkpoint beyond the save itself (a thread turn's pointer move)."""

    thread_id: str
    # The head this checkpoint replaces without descending from it (a fork), else None.
    replaced_head: str | None
    # The thread whose head the turn resumes from and commits over by compare-and-swap
    # (what lets the cache answer for that head), else None.
    head_of: str | None

    async def after_save(self, checkpoint_id: str) -> None: ...


# (event name, data) pairs; an adapter frames them (SSE) or collects them.
Event = tuple[str, dict[str, Any]]
# Called with (checkpoint ID, thread ID, exact response bytes, stamp=<the checkpoint's
# timestamp>) after the response is rendered and before the checkpoint is saved: the
# last moment to refuse the commit. What it returns is added to the checkpoint's metadata
# (an idempotency claim's response, when the checkpoint itself records the commit).
CommitHook = Callable[..., Awaitable[Mapping[str, Any] | None]]
# A hook may also have ``not_committed()``: told when the call is known not to have committed
# (a thread turn's checkpoint save failed, so its pointer swap never ran; or the commit failed
# with none of its writes reaching storage).


@contextmanager
def _withdrawn_on_failure(before_commit: CommitHook | None, *, before_the_commit: bool) -> Iterator[None]:
    """Tell the hook (``not_committed``) that a failed step committed nothing: any failure
    of a step before the commit point, or of the commit when none of its writes reached
    storage. Otherwise whether it committed is for the hook to find out."""
    with watching_writes() as writes:
        try:
            yield
        except BaseException:
            withdraw = getattr(before_commit, "not_committed", None)
            if callable(withdraw) and (before_the_commit or writes.none_reached_storage):
                withdraw()
            raise


class WorkflowSource(Protocol):
    """Anything that builds a fresh workflow per call (``workflows.WorkflowSpec`` does)."""

    def build(self) -> Workflow: ...


def _in_thread(thread_id: str | None) -> ResumeError:
    """The refusal of a checkpoint that is not this call's: it names no thread (the caller
    may not be the thread's), only the route through which the thread's own origin forks."""
    if thread_id is not None:
        return CheckpointNotInThread(f"That checkpoint is not in thread '{thread_id}'; nothing was run.")
    return CheckpointInThread(
        "That checkpoint belongs to a thread: continue it, or fork it, through its thread "
        "(POST /api/threads/{thread_id}/runs with 'from_checkpoint_id'); nothing was run."
    )


class Runner(Protocol):
    """Runs one call: ``RunService`` for /api/runs, ``ThreadRunner`` for a thread's turns."""

    async def validate(self, request: RunRequest) -> None:
        """Refuse now what the run would refuse (a background accept), running nothing."""
        ...

    async def run_to_json(self, request: RunRequest, *, before_commit: CommitHook | None = None) -> bytes: ...

    async def open_stream(
        self, request: RunRequest, *, before_commit: CommitHook | None = None, cleanup: AsyncExitStack | None = None
    ) -> AsyncIterator[Event]:
        """Start the run; what it holds until the stream ends is registered on ``cleanup``."""
        ...

    async def is_committed(self, checkpoint_id: str, thread_id: str | None) -> bool:
        """Whether ``checkpoint_id`` was committed (the one answer, ``RunService``'s)."""
        ...


class RunService:
    def __init__(
        self,
        store: CheckpointStore,
        spec: WorkflowSource | WorkflowCatalog,
        pointers: ThreadPointers,
        *,
        codec: CheckpointCodec | None = None,
    ) -> None:
        """``spec``: the workflows this service runs (a ``WorkflowCatalog``, whose ``codec_for``
        the store was built with, so that it reads each checkpoint with its own version's
        codec), or one unversioned workflow, whose catalog reports ``codec`` (default: the
        library's default codec; the store encodes and decodes with its own)."""
        self.store = store
        self.spec = spec
        if isinstance(spec, WorkflowCatalog):
            self.catalog = spec
        else:
            self.catalog = WorkflowCatalog.single(spec, codec if codec is not None else CheckpointCodec())
        self.pointers = pointers
        # The one answer to "did checkpoint X commit?" (replays, background runs, forks).
        self.ledger = CommitLedger(store, pointers)

    async def _prepare(
        self, request: RunRequest, head: AfterSave | None = None, *, thread_id: str | None = None
    ) -> PreparedRun:
        """Load and validate the checkpoint and hydrate a fresh workflow; run nothing.

        ``thread_id``: the thread whose turn this is (``head`` names it when there is one).
        A checkpoint of another thread, or of any thread for a call without one, is refused
        here, where it is read, before anything runs (``ownership`` says why)."""
        checkpoint: WorkflowCheckpoint | None = None
        if request.checkpoint_id is not None:
            thread_id = head.thread_id if head is not None else thread_id
            checkpoint, info = await self.store.load_described(
                request.checkpoint_id, head_of=head.head_of if head else None
            )
            if info.thread_id is not None and info.thread_id != thread_id:
                raise _in_thread(thread_id)
        # Building a workflow (~0.5 ms) and hydrating it are CPU work with no wait in them, and
        # a checkpoint from the cache was no wait either: yield between the steps, so a burst
        # of requests takes turns with the event loop instead of running each step for all.
        await asyncio.sleep(0)
        # The version that runs it, from the checkpoint's own metadata (no storage operation).
        version, path = self.catalog.choose(request.workflow, checkpoint)
        workflow = version.build()
        # Without this, the executors (and the state hydrated into them) outlive the call
        # until the cycle collector runs (``af_internals.unlink_handlers`` says why).
        af_internals.unlink_handlers(workflow)
        # Else each checkpoint deep-copies every executor's state 2E + 1 times, on the loop;
        # only the final checkpoint is read, once the run ended (``RunCheckpoints``), and the
        # checkpoint loaded above is this call's own, handed over to the restore.
        af_internals.share_executor_states(workflow)
        await asyncio.sleep(0)
        if checkpoint is not None and path:
            _, current = self.catalog.of_metadata(checkpoint.metadata)
            checkpoint = migrate(checkpoint, path, workflow, from_version=current)
        edited: dict[str, Any] = {}
        if request.state_edit is not None and checkpoint is not None:
            apply_edit(checkpoint, request.state_edit, workflow)
            edited = edit_stamp(checkpoint.checkpoint_id, request.state_edit)
        turn = request.turn if request.resent is None else unseen_input(request.turn, request.resent, checkpoint)
        progress = request.progress if (request.durability or version.durability) == "superstep" else None
        base = checkpoint.checkpoint_id if checkpoint is not None else None
        continuation = await progress.load(version.codec, base, workflow) if progress is not None else None
        if continuation is not None:
            run = await continue_run(workflow, checkpoint, turn, continuation, stream=request.stream)
        else:
            run = await prepare_run(workflow, checkpoint, turn, stream=request.stream)
        if progress is not None:
            run.save_progress(progress, version.codec)
        run.stamp = {**version.stamp, **edited}
        return run

    async def _save(
        self,
        run: PreparedRun,
        collector: ResultCollector,
        head: AfterSave | None,
        before_commit: CommitHook | None,
        request: RunRequest,
    ) -> tuple[dict[str, Any], bytes]:
        """Persist the final checkpoint, then let ``head`` (a thread turn) commit it.

        The response is rendered first, so nothing can fail between the commit and the
        answer. What committing means for a thread (moving its pointer, cleaning up a
        lost race) is ``thread_runs``' business, not this module's.
        """
        saved = await run.final_checkpoint()
        if request.final_checkpoint_id is not None:
            saved.checkpoint_id = request.final_checkpoint_id
        body = collector.body(saved)
        if request.thread_created:
            body["thread_created"] = True
        rendered = strict_json.dumps(body)
        thread_id = head.thread_id if head else None
        if head is not None:  # a thread's messages are read back from its turns' checkpoints
            sent = [_sent(m) for m in run.turn.messages or ()]
            saved.metadata = {**saved.metadata, TRANSCRIPT: transcript(sent, body)}
        if before_commit is not None:
            carried = await before_commit(saved.checkpoint_id, thread_id, rendered, stamp=saved.timestamp)
            if carried:
                saved.metadata = {**saved.metadata, **carried}
        # A thread turn's save comes before its commit (the pointer swap); a run without a
        # thread commits by its save. Either step that failed with none of its writes
        # reaching storage (``failures.never_sent``) committed nothing.
        with _withdrawn_on_failure(before_commit, before_the_commit=head is not None):
            await self.store.save(saved, thread_id=thread_id, replaced_head=head.replaced_head if head else None)
        if head is not None:
            with _withdrawn_on_failure(before_commit, before_the_commit=False):
                await head.after_save(saved.checkpoint_id)
        return body, rendered

    async def is_committed(self, checkpoint_id: str, thread_id: str | None) -> bool:
        """Whether a checkpoint was committed (``CommitLedger.committed``)."""
        return await self.ledger.committed(checkpoint_id, thread_id)

    async def validate(self, request: RunRequest, *, thread_id: str | None = None) -> None:
        """Load, validate and hydrate, then discard: what a run would refuse, refused now
        (a background run's accept), having executed nothing. ``thread_id``: the thread
        whose turn it is (None: a call without a thread)."""
        await self._prepare(request, thread_id=thread_id)

    async def run_to_json(
        self, request: RunRequest, *, head: AfterSave | None = None, before_commit: CommitHook | None = None
    ) -> bytes:
        """Run the call to completion; return the exact response bytes."""
        run = await self._prepare(request, head)
        collector = run.collector
        async with aclosing(run.events()) as events:
            async for event in events:
                collector.add(event)
        return (await self._save(run, collector, head, before_commit, request))[1]

    async def open_stream(
        self,
        request: RunRequest,
        *,
        head: AfterSave | None = None,
        before_commit: CommitHook | None = None,
        cleanup: AsyncExitStack | None = None,
    ) -> AsyncIterator[Event]:
        """Validate, hydrate and start the run, then return its events.

        Everything that can be refused (bad checkpoint, bad input, the framework's own
        pre-run checks) is decided before this returns, so it still becomes a plain
        HTTP error. Failures after that arrive as an ``error`` event.
        """
        run = await self._prepare(request, head)
        events = run.events()
        try:
            first = await anext(events)  # the run's `started` event: pre-run checks passed
        except BaseException:
            await events.aclose()
            raise
        # The stream is drained later, outside this request's context: keep it for the save.
        return self._stream(
            run,
            first,
            events,
            head=head,
            before_commit=before_commit,
            scope=RequestScope.capture(),
            request=request,
        )

    async def _stream(
        self,
        run: PreparedRun,
        first: WorkflowEvent,
        events: AsyncIterator[WorkflowEvent],
        *,
        head: AfterSave | None,
        before_commit: CommitHook | None,
        scope: RequestScope,
        request: RunRequest,
    ) -> AsyncIterator[Event]:
        collector = run.collector
        if request.events == "all":
            collector.include_lifecycle()
        try:
            async with aclosing(events):  # type: ignore[type-var]
                collector.add(first)
                async for event in events:
                    item = collector.add(event)
                    if item is not None:
                        yield item
            with within(scope):
                body, _ = await self._save(run, collector, head, before_commit, request)
            yield "done", body
        except ResumeError as exc:
            yield "error", exc.to_body()
        except Exception:
            logger.exception("Streaming run failed")
            yield "error", WorkflowFailed("The workflow run failed; nothing was saved.").to_body()
