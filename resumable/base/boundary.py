"""The library's boundary: whatever goes wrong below it leaves as a ``ResumeError``.

Workflow factories, request parsers and the framework can raise anything. A
``ConfigurationError`` (a factory reading its settings) is ``ServerMisconfigured``; any
other ``Exception`` is a generic ``ResumeError`` with its detail only in the logs, so a
run settles with a documented code, a background delivery is not retried for a bug, and
nothing internal reaches a caller. Cancellation and other ``BaseException`` pass as they are.
"""

from __future__ import annotations

import logging
import traceback

from .errors import ConfigurationError, ResumeError, ServerMisconfigured

logger = logging.getLogger(__name__)


def library_error(exc: BaseException) -> BaseException:
    """``exc`` as the caller may see it (the same object when it already is one)."""
    if isinstance(exc, ResumeError) or not isinstance(exc, Exception):
        return exc
    if isinstance(exc, ConfigurationError):
        logger.error("Configuration error: %s", exc)
        return ServerMisconfigured()
    logger.error("A run failed outside its own error handling", exc_info=exc)
    return ResumeError("An internal error occurred; nothing was committed.")


def release_frames(exc: BaseException) -> None:
    """Drop the locals of the finished frames in ``exc``'s traceback (and its causes').

    A failed workflow's error travels up through frames that hold the error's own task
    (the framework gathers its executors' tasks, and a task keeps its exception): the
    error, its traceback, those frames and the task form a cycle that holds the whole
    run (workflow, executors, checkpoints) until the cycle collector runs. The traceback
    keeps its file and line numbers, so logs still show where it failed; only locals go.
    Frames still executing (the caller's own) are skipped by ``traceback.clear_frames``.
    """
    seen: set[int] = set()
    pending: list[BaseException | None] = [exc]
    while pending:
        error = pending.pop()
        if error is None or id(error) in seen:
            continue
        seen.add(id(error))
        traceback.clear_frames(error.__traceback__)
        pending += [error.__cause__, error.__context__]


__all__ = ["library_error", "release_frames"]
