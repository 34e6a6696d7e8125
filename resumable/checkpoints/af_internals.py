"""Every use of a private Agent Framework API, in one module, and the versions it was checked on.

Agent Framework (every version from ``OLDEST_SUPPORTED`` to ``NEWEST_SUPPORTED``) has no public
way to (a) restore a checkpoint the caller already holds into a workflow before a run, or (b)
encode and decode checkpoint values outside its file storage. The atomic resume needs both.
Decoding is ours (``resumable/checkpoints/codec.py``): the framework's restricted unpickler
admits ``builtins:type`` up to 1.23.0, and in every supported version has no size budget and
admits every ``agent_framework.*`` and ``openai.types.*`` class, so only its encoder is used. The
names below are the framework's own: its sub-workflow executor uses ``restore_checkpoint`` and
its ``FileCheckpointStorage`` uses the codec functions.

``tests/library/test_af_contract.py`` pins the behaviour relied on here; when an upgrade
changes it, those tests fail with a message that says what to look at.

When the framework accepts a checkpoint and new input in one public call (upstream #7863;
#8522 proposes ``Workflow.run(checkpoint=...)``), ``test_one_public_call_takes_a_checkpoint_and_new_input``
in that file fails (it pins that no such call exists), and the switch is this module and its one
caller, ``resumable/core/resume.py``:

- ``PreparedRun._start`` passes the decoded checkpoint with the messages or responses to that
  one ``run(...)``; ``prepare_run`` no longer calls ``hydrate`` or ``has_in_flight_messages``.
  ``validate_checkpoint`` (workflow name, graph signature, pending requests, in-flight status)
  reads only the checkpoint and stays: a changed graph is still a 409 before anything runs.
- A restore the framework itself refuses then fails inside the run, after its ``started``
  event: ``PreparedRun.events`` must map that failure to ``CheckpointIncompatible`` instead of
  ``WorkflowFailed``.
- ``validate_responses`` checks answers against a hydrated workflow's pending requests: it
  goes (and a wrong answer fails inside the run, as above) only if the public call checks
  answers before it starts; otherwise ``hydrate`` stays for answer turns alone.
- ``share_executor_states``, ``unlink_handlers``, ``encode_checkpoint_value`` and
  ``executor_states`` are not about the one-run resume and stay as they are.
"""

from __future__ import annotations

import importlib.metadata
import re
import weakref
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from agent_framework import (
    AgentExecutorRequest,
    AgentExecutorResponse,
    AgentResponse,
    Content,
    Message,
    Workflow,
    WorkflowCheckpoint,
    WorkflowEvent,
    WorkflowEventSource,
    WorkflowMessage,
)
from agent_framework._workflows._checkpoint_encoding import (  # private: no public export up to 1.26.0
    encode_checkpoint_value as _encode_checkpoint_value,
)
from agent_framework._workflows._const import EXECUTOR_STATE_KEY  # private: where executor states live
from agent_framework._workflows._runner_context import MessageType  # private: WorkflowMessage.type's enum
from agent_framework._workflows._state import State  # private: the runner's superstep state, not exported

# The supported range of agent-framework-core, both ends included: the versions whose private
# calls (below) and checkpoint format were verified. The newest is the lock's pin
# (requirements.in); the oldest is what CI's 3.11 pass installs over the lock
# (scripts/try-framework.sh). tests/library/test_af_contract.py holds both ends to those files.
OLDEST_SUPPORTED = "1.23.0"
NEWEST_SUPPORTED = "1.26.0"
FRAMEWORK_DISTRIBUTION = "agent-framework-core"


@lru_cache(maxsize=1)
def installed_framework_version() -> str:
    """The installed agent-framework-core's version, as its package metadata says."""
    return importlib.metadata.version(FRAMEWORK_DISTRIBUTION)


def _release(version: str) -> tuple[int, ...]:
    """A version's release numbers (``1.26.0rc1`` -> ``(1, 26, 0)``): enough to order them."""
    match = re.match(r"\d+(?:\.\d+)*", version.strip())
    if match is None:
        raise ValueError(f"not a version: {version!r}")
    numbers = [int(part) for part in match.group().split(".")]
    return tuple(numbers + [0] * (3 - len(numbers)))


def is_supported_framework(version: str) -> bool:
    """Whether ``version`` is inside the supported range, both ends included."""
    return _release(OLDEST_SUPPORTED) <= _release(version) <= _release(NEWEST_SUPPORTED)


def framework_version_problem(version: str) -> str | None:
    """What is wrong with running on ``version``, or None inside the supported range."""
    if is_supported_framework(version):
        return None
    return (
        f"{FRAMEWORK_DISTRIBUTION} {version} is installed, outside the supported range "
        f"{OLDEST_SUPPORTED} to {NEWEST_SUPPORTED}: the resume's private calls and the checkpoint "
        "format are unverified on it (install the lock, requirements.txt)"
    )


# The framework classes its checkpoints pickle: messages and their content, agent
# responses, pending request events, and the runner's own message envelope. Found by
# encoding real checkpoints of every shipped workflow (pending requests and agent
# sessions included); ``tests/library/test_af_contract.py`` re-checks that list on each run.
CHECKPOINT_DATA_TYPES: tuple[type, ...] = (
    Message,
    Content,
    AgentResponse,
    WorkflowEvent,
    WorkflowEventSource,
    WorkflowMessage,
    MessageType,
    AgentExecutorRequest,
    AgentExecutorResponse,
)


def executor_states(checkpoint: WorkflowCheckpoint) -> dict[str, Any]:
    """Each executor's saved state by executor ID, as the checkpoint holds it: the dict a
    version migration edits in place (``core/catalog.py``)."""
    states = checkpoint.state.setdefault(EXECUTOR_STATE_KEY, {})
    if not isinstance(states, dict):
        raise TypeError("the checkpoint's executor states are not a mapping")
    return states


def encode_checkpoint_value(value: Any) -> Any:
    """The framework's checkpoint encoding: JSON-native values as-is, others pickled."""
    return _encode_checkpoint_value(value)


async def validate_responses(workflow: Workflow, responses: Mapping[str, Any]) -> dict[str, Any]:
    """Check and convert answers to the hydrated workflow's pending requests, with the
    very check ``run(responses=...)`` makes first (type coercion, and for computer-use
    calls the matching call ID and acknowledged safety checks).

    Called after ``hydrate`` and before the run, so a wrong answer is a 400 and not a
    failure halfway through the run. Raises what the framework raises (``ValueError``,
    ``TypeError``, ``AgentInvalidResponseException``, ``RuntimeError``).
    """
    return await workflow._validate_responses_internal(responses)


async def hydrate(workflow: Workflow, checkpoint: WorkflowCheckpoint) -> None:
    """Restore ``checkpoint`` into ``workflow`` before its run starts.

    Done before ``run()`` rather than inside it: ``run()`` resets the iteration count
    and per-run kwargs at its start, which would clobber a restore done earlier in
    the same run, and a restore inside the run happens after the run's ``started``
    event, too late to refuse a bad checkpoint with a plain HTTP error.
    """
    await workflow._runner.restore_checkpoint(checkpoint)


async def has_in_flight_messages(workflow: Workflow) -> bool:
    """Whether the hydrated workflow still has undelivered executor messages."""
    return bool(await workflow._runner.context.has_messages())


def unlink_handlers(workflow: Workflow) -> None:
    """Make each executor's handler table refer to its own methods weakly.

    ``Executor.__init__`` stores the bound methods of its ``@handler`` and
    ``@response_handler`` methods in ``_handlers`` and ``_response_handlers``: the
    executor refers to a method that refers back to the executor. So an executor (and
    whatever it holds: a conversation restored from a checkpoint, an agent's messages)
    is never freed by reference counting when its call ends, only by a later pass of
    the cycle collector; under steady load megabytes of finished runs pile up between
    passes (issue 30). A weak method keeps the table working while the workflow holds
    its executors, and leaves nothing to collect once the call drops the workflow.
    Handlers that are not the executor's own bound methods (a function executor's
    wrapper) are left as they are: they do not refer back.
    """
    for executor in workflow.executors.values():
        for table in (getattr(executor, "_handlers", None), getattr(executor, "_response_handlers", None)):
            for key, handler in list((table or {}).items()):
                if getattr(handler, "__self__", None) is executor:
                    table[key] = _weak_method(handler)  # type: ignore[index]
        inner = getattr(executor, "workflow", None)  # a sub-workflow's executors
        if isinstance(inner, Workflow):
            unlink_handlers(inner)


def share_executor_states(workflow: Workflow) -> None:
    """Let this workflow's checkpoints hold its executors' state by reference, not by copies.

    Before each checkpoint the runner stores every executor's ``on_checkpoint_save`` dict
    through ``State.get``/``State.set`` on one key, and both deep-copy the whole map of
    every executor's state; ``export_state`` deep-copies it once more into the checkpoint:
    with E executors, 2E + 1 deep copies per checkpoint, and a run checkpoints after every
    superstep. For a 1 MB state of 2,200 small dicts (a conversation) a copy takes about
    3 ms: a 5-executor resume spent about 190 ms copying on the event loop, and 50 such
    runs at once held it for seconds (``bench/results.md``).

    Here that key is copied shallowly (the map is rebuilt, the per-executor dicts are what
    the hooks returned), and so is the export. So a checkpoint refers to the executors'
    live state and sees what they do after it, until the run ends. That is sound only
    where nothing but the run's final checkpoint is read, and only after the run ended (it
    is encoded then, which is its snapshot): ``resume.RunCheckpoints``, the per-call storage
    the atomic resume hands the run. The restore takes over the checkpoint it restores
    instead of deep-copying it (about 4 ms on the loop for that 1 MB state): the executors
    then change it as they go, so it must be this call's own, never read again but for its
    ID (``RunService`` decodes one per call). Other keys (the executors' shared state) keep
    the framework's copies. Sub-workflows keep the framework's behaviour.
    """
    state = workflow._runner._state
    if type(state) is State:  # this workflow's State only, never the class; no closure, no cycle
        state.__class__ = _SharedExecutorStates


class _SharedExecutorStates(State):
    """The framework's ``State``, with the executor-state key shared, not copied (see above)."""

    def get(self, key: str, default: Any = None) -> Any:
        if key == EXECUTOR_STATE_KEY and self.has(key):
            stored = self._pending[key] if key in self._pending else self._committed[key]
            if isinstance(stored, dict):
                return dict(stored)
        return super().get(key, default)

    def set(self, key: str, value: Any) -> None:
        if key == EXECUTOR_STATE_KEY and isinstance(value, dict):
            self._pending[key] = dict(value)
        else:
            super().set(key, value)

    def import_state(self, state: dict[str, Any]) -> None:
        self._committed.update(state)

    def export_state(self) -> dict[str, Any]:
        # Other keys' committed values are the private copies ``set`` made, never handed out
        # (``get`` returns copies) and replaced, not changed, by later commits: shared as is.
        return {
            key: dict(value) if key == EXECUTOR_STATE_KEY and isinstance(value, dict) else value
            for key, value in self._committed.items()
        }


def _weak_method(method: Any) -> Callable[..., Any]:
    ref = weakref.WeakMethod(method)

    def call(*args: Any, **kwargs: Any) -> Any:
        bound = ref()
        if bound is None:  # cannot happen while the workflow runs: it holds its executors
            raise RuntimeError("The executor of this handler is gone.")
        return bound(*args, **kwargs)

    call.__name__ = getattr(method, "__name__", "handler")
    call.__qualname__ = getattr(method, "__qualname__", call.__name__)
    return call
