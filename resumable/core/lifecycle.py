"""The run's executor lifecycle as stream events: what a debugger needs to follow a turn.

Agent Framework's run stream already holds it (``superstep_started``/``_completed``,
``executor_invoked``/``_completed``/``_failed``); callers who ask (``"events": "all"``) get
each as an event of its own, with the superstep it ran in and how long it took, measured
here as the events pass (a monotonic clock: durations, never wall-clock times).

An executor's failure carries the exception's class only: its message and traceback may
hold internals (paths, secrets in URLs), and the run's log has them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from agent_framework import WorkflowEvent

LEVELS = ("outputs", "all")
KINDS = frozenset(
    {"superstep_started", "superstep_completed", "executor_invoked", "executor_completed", "executor_failed"}
)


def _ms(since: float) -> float:
    return round((time.monotonic() - since) * 1000, 3)


class LifecycleClock:
    """Turns lifecycle events into (name, data), timing supersteps and invocations."""

    def __init__(self, to_json: Callable[[Any], Any]) -> None:
        self._to_json = to_json
        self._iteration = 0
        self._superstep_started = 0.0
        # When each open invocation started, by executor ID: an executor handed several
        # messages in one superstep is invoked once per message, each closed in turn.
        self._invoked: dict[str, list[float]] = {}

    def render(self, event: WorkflowEvent) -> tuple[str, dict[str, Any]] | None:
        kind = event.type
        if kind not in KINDS:
            return None
        if kind == "superstep_started":
            self._iteration = int(event.iteration or 0)
            self._superstep_started = time.monotonic()
            return kind, {"iteration": self._iteration}
        if kind == "superstep_completed":
            return kind, {"iteration": int(event.iteration or 0), "duration_ms": _ms(self._superstep_started)}
        executor_id = str(event.executor_id)
        if kind == "executor_invoked":
            self._invoked.setdefault(executor_id, []).append(time.monotonic())
            return kind, {"executor_id": executor_id, "iteration": self._iteration, "input": self._to_json(event.data)}
        open_ones = self._invoked.get(executor_id) or [time.monotonic()]
        started = open_ones.pop(0)
        data: dict[str, Any] = {"executor_id": executor_id, "iteration": self._iteration, "duration_ms": _ms(started)}
        if kind == "executor_completed":
            data["outputs"] = self._to_json(list(event.data or []))
        else:
            details = event.details or event.data
            data["error"] = {"type": str(getattr(details, "error_type", None) or "Exception")}
        return kind, data
