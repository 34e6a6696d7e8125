"""Workflow factories the function can host, by name; ``WORKFLOW`` names the default one.

Replace or add a factory here to host your own workflow. Each is imported only when
a turn needs it, so an unused integration (or an old version) costs nothing at cold start.

A ``REGISTRY`` value is either one ``"module:attribute"`` (an unversioned workflow: one
version, labelled ``v1``) or a ``Versions`` (several, oldest first, and the policy that
says which one a thread's next turn runs on). docs/changing-workflows.md walks through it.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from agent_framework import Workflow, WorkflowCheckpoint

FIRST_VERSION = "v1"
POLICIES = ("pinned", "upgrade")
# What a background turn saves as it goes: only its end ("turn"), or a progress checkpoint
# after each superstep ("superstep"; docs/background-runs.md, "Durability").
DURABILITIES = ("turn", "superstep")
_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass(frozen=True, slots=True)
class Versions:
    """One workflow's versions, oldest first: ``{"v1": "mod:SPEC", "v2": "mod_v2:SPEC"}``.

    ``policy``: ``pinned`` (a thread stays on the version that wrote its checkpoint; new
    threads start on the newest) or ``upgrade`` (a thread moves to the newest at its next
    turn, through each newer version's ``WorkflowSpec.migrate``).
    """

    specs: Mapping[str, str]
    policy: str = "pinned"

    def __post_init__(self) -> None:
        if not self.specs:
            raise ValueError("Versions needs at least one version")
        bad = [label for label in self.specs if not _LABEL.fullmatch(label)]
        if bad:
            raise ValueError(f"version labels must be short tokens ([A-Za-z0-9._-]): {bad}")
        if self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, not {self.policy!r}")


# name -> "module:attribute" of a WorkflowSpec, or a Versions of them
REGISTRY: dict[str, str | Versions] = {
    "default": "workflows.default_conversation:SPEC",
    "chat-agents": "workflows.chat_agents:SPEC",
    # Ten executors to watch in the console's debugger (workflows/step_pipeline.py).
    "step-pipeline": "workflows.step_pipeline:SPEC",
}


@dataclass(frozen=True, slots=True)
class WorkflowSpec:
    """How to build one workflow, and which application types its checkpoints hold.

    ``build`` is called once per request: a workflow instance runs one call at a time.
    ``checkpoint_types`` are added to the restricted decoder's allowlist; list every
    non-framework class that can end up in executor state or in a pending request.
    ``migrate`` (a version after the first): maps a checkpoint of the version before this
    one onto this version's graph (executor states, pending requests, messages); it may
    change the checkpoint in place and return None. Without it, the version declares itself
    compatible with the one before (the graph signature check then decides).
    ``durability``: what a background turn of this workflow saves by default (a request may
    ask for the other): ``"turn"`` (its end only; a crash redoes the turn) or ``"superstep"``
    (a progress checkpoint after each superstep; a crash redoes at most one superstep).
    """

    build: Callable[[], Workflow]
    checkpoint_types: tuple[type, ...] = ()
    migrate: Callable[[WorkflowCheckpoint], WorkflowCheckpoint | None] | None = field(default=None)
    durability: str = "turn"

    def __post_init__(self) -> None:
        if self.durability not in DURABILITIES:
            raise ValueError(f"durability must be one of {DURABILITIES}, not {self.durability!r}")

    @property
    def allowed_type_keys(self) -> tuple[str, ...]:
        return tuple(f"{t.__module__}:{t.__qualname__}" for t in self.checkpoint_types)


def versions_of(name: str) -> Versions:
    """The versions registered as ``name`` (one, ``v1``, for a plain entry); ``KeyError``
    lists the valid names."""
    try:
        entry = REGISTRY[name]
    except KeyError:
        raise KeyError(f"Unknown WORKFLOW {name!r}; expected one of {sorted(REGISTRY)}") from None
    return entry if isinstance(entry, Versions) else Versions({FIRST_VERSION: entry})


def load_spec(name: str, version: str | None = None) -> WorkflowSpec:
    """The spec registered as ``name`` at ``version`` (None: the newest); ``KeyError``
    lists the valid names or versions."""
    specs = versions_of(name).specs
    label = version if version is not None else list(specs)[-1]
    try:
        target = specs[label]
    except KeyError:
        raise KeyError(f"Workflow {name!r} has no version {label!r}; expected one of {list(specs)}") from None
    module_name, attribute = target.split(":")
    spec = getattr(importlib.import_module(module_name), attribute)
    if not isinstance(spec, WorkflowSpec):
        raise TypeError(f"{target} is not a WorkflowSpec")
    return spec
