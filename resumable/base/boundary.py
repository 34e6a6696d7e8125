"""The library's boundary: whatever goes wrong below it leaves as a ``ResumeError``.

Workflow factories, request parsers and the framework can raise anything. A
``ConfigurationError`` (a factory reading its settings) is ``ServerMisconfigured``; any
other ``Exception`` is a generic ``ResumeError`` with its detail only in the logs, so a
run settles with a documented code, a background delivery is not retried for a bug, and
nothing internal reaches a caller. Cancellation and other ``BaseException`` pass as they are.
"""

from __future__ import annotations

import logging

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


__all__ = ["library_error"]
