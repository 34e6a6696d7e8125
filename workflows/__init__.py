"""Workflow factories the function can host, selected by the ``WORKFLOW`` setting.

Replace or add a factory here to host your own workflow. Each is imported only when
selected, so an unused integration costs nothing at cold start.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from agent_framework import Workflow

# setting value -> "module:attribute" of a WorkflowSpec
REGISTRY: dict[str, str] = {
    "default": "workflows.default_conversation:SPEC",
    "chat-agents": "workflows.chat_agents:SPEC",
}


@dataclass(frozen=True, slots=True)
class WorkflowSpec:
    """How to build one workflow, and which application types its checkpoints hold.

    ``build`` is called once per request: a workflow instance runs one call at a time.
    ``checkpoint_types`` are added to the restricted decoder's allowlist; list every
    non-framework class that can end up in executor state or in a pending request.
    """

    build: Callable[[], Workflow]
    checkpoint_types: tuple[type, ...] = ()

    @property
    def allowed_type_keys(self) -> tuple[str, ...]:
        return tuple(f"{t.__module__}:{t.__qualname__}" for t in self.checkpoint_types)


def load_spec(name: str) -> WorkflowSpec:
    """The spec registered as ``name``; ``KeyError`` lists the valid names."""
    try:
        target = REGISTRY[name]
    except KeyError:
        raise KeyError(f"Unknown WORKFLOW {name!r}; expected one of {sorted(REGISTRY)}") from None
    module_name, attribute = target.split(":")
    spec = getattr(importlib.import_module(module_name), attribute)
    if not isinstance(spec, WorkflowSpec):
        raise TypeError(f"{target} is not a WorkflowSpec")
    return spec
