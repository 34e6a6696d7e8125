"""A checkpoint's state as a debugger sees it, and an edit of it that a fork starts from.

The checkpoint has been decoded by the store's own restricted codec before anything here
sees it. The view is JSON (``to_json``): nothing in it is ever evaluated by a client.

An edit replaces executors' states wholesale with JSON the caller sent, and only where the
state it replaces is JSON-native itself: a state that holds a tuple, a dataclass or a
``Message`` was pickled, and a JSON value put in its place would hand the executor a
different type than it saved (a ``list`` for a ``tuple``), failing later and far from here.
The edited value must not hold the codec's pickle envelope keys either: encoded as they are,
they would be read back as a pickle.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from agent_framework import Workflow, WorkflowCheckpoint

from ..base.errors import InvalidRequest, StateNotEditable
from ..checkpoints import af_internals
from .results import EDITED, to_json

# The framework's checkpoint encoding marks a pickled value with these keys.
_ENVELOPE_KEYS = frozenset({"__pickled__", "__type__"})


def _not_native(value: Any, path: str) -> Iterator[str]:
    """Each place in ``value`` JSON cannot hold as is, as ``path: type``."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                yield f"{path}: a {type(key).__name__} key"
            else:
                yield from _not_native(item, f"{path}.{key}")
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            yield from _not_native(item, f"{path}[{index}]")
        return
    yield f"{path}: {type(value).__module__}.{type(value).__qualname__}"


def not_json_native(value: Any) -> list[str]:
    """The places in a state that are not JSON-native (empty: it is)."""
    return list(_not_native(value, "$"))


def _user_keys(state: Mapping[str, Any]) -> dict[str, Any]:
    """The shared state a workflow wrote: the framework keeps its own under ``_`` keys (run
    kwargs among them, which may hold what a caller passed to a model client)."""
    return {key: value for key, value in state.items() if not key.startswith("_")}


def state_view(checkpoint: WorkflowCheckpoint) -> dict[str, Any]:
    """Each executor's state and the shared state, as JSON, with what makes a state uneditable."""
    executors = []
    for executor_id, state in sorted(af_internals.executor_states(checkpoint).items()):
        blocked = not_json_native(state)
        executors.append(
            {"executor_id": executor_id, "state": to_json(state), "editable": not blocked, "not_json": blocked}
        )
    return {
        "checkpoint_id": checkpoint.checkpoint_id,
        "executors": executors,
        "shared_state": to_json(_user_keys(checkpoint.state)),
        "edited": checkpoint.metadata.get(EDITED),
    }


def parse_edit(value: Any) -> dict[str, dict[str, Any]]:
    """``executor_states`` of an edit's body: a non-empty object of executor ID → state object."""
    if not isinstance(value, dict) or not value:
        raise InvalidRequest(
            "'executor_states' must be a non-empty object of {executor_id: state object}.",
            details={"param": "executor_states"},
        )
    for executor_id, state in value.items():
        if not isinstance(state, dict):
            raise InvalidRequest(
                f"The state of executor '{executor_id}' must be a JSON object.", details={"param": "executor_states"}
            )
        envelope = _envelope_key(state)
        if envelope is not None:
            raise InvalidRequest(
                f"The state of executor '{executor_id}' holds the key '{envelope}', which checkpoints reserve "
                "for pickled values.",
                details={"param": "executor_states"},
            )
    return value


def _envelope_key(value: Any) -> str | None:
    if isinstance(value, dict):
        for key, item in value.items():
            if key in _ENVELOPE_KEYS:
                return str(key)
            found = _envelope_key(item)
            if found is not None:
                return found
    elif isinstance(value, list):
        for item in value:
            found = _envelope_key(item)
            if found is not None:
                return found
    return None


def apply_edit(checkpoint: WorkflowCheckpoint, edit: Mapping[str, dict[str, Any]], workflow: Workflow) -> None:
    """Put the edited states into ``checkpoint`` (this call's own decoded copy) before its restore,
    and record the edit in its metadata; ``StateNotEditable`` for a state JSON cannot stand for."""
    states = af_internals.executor_states(checkpoint)
    for executor_id in edit:
        if executor_id not in workflow.executors:
            raise InvalidRequest(
                f"The workflow has no executor '{executor_id}'.",
                details={"param": "executor_states", "executors": sorted(workflow.executors)},
            )
        blocked = not_json_native(states.get(executor_id, {}))
        if blocked:
            raise StateNotEditable(
                f"Executor '{executor_id}' keeps state JSON cannot hold ({'; '.join(blocked[:5])}): edited as JSON, "
                "it would come back as other types. Only a JSON-native state can be edited.",
                details={"executor_id": executor_id, "not_json": blocked},
            )
    for executor_id, state in edit.items():
        states[executor_id] = dict(state)


def edit_stamp(from_checkpoint_id: str, edit: Mapping[str, Any]) -> dict[str, Any]:
    """What the edited turn's checkpoint records: where it was edited from, and which executors."""
    return {EDITED: {"from_checkpoint_id": from_checkpoint_id, "executors": sorted(edit)}}
