"""Completion callbacks' payload formats, by the name a run record stores (``callback_format``).

A protocol whose receivers expect their own body (A2A's push notifications: a
``StreamResponse`` and its token header) registers a renderer here, from the app's entry
point (``function_app.py``), so the queue trigger that delivers the callback has it on any
instance. Delivery itself (signing, address checks, retries, deduplication) stays the one
in ``callbacks``: a format only renders the body and adds headers. A run without a format
gets the library's ``run.completed``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from resumable.base import ServerMisconfigured

if TYPE_CHECKING:  # the background modules load on a callback's first use, not at cold start
    from resumable.background.callbacks import Render
    from resumable.background.finished_run import FinishedRun

logger = logging.getLogger(__name__)
_FORMATS: dict[str, Render] = {}


def register(name: str, render: Render) -> None:
    """``render`` is the payload of every callback whose run names ``name``."""
    _FORMATS[name] = render


def render(run: FinishedRun) -> tuple[bytes, dict[str, str]]:
    """The run's payload and added headers: its format's, or ``run.completed``."""
    if run.callback_format is None:
        from resumable.background.callbacks import render_payload  # noqa: PLC0415 - on first use

        return render_payload(run)
    chosen = _FORMATS.get(run.callback_format)
    if chosen is None:  # a record written by a build that had this format: never sent half-formed
        logger.error("Callback format %r is not registered (function_app.py)", run.callback_format)
        raise ServerMisconfigured()
    return chosen(run)
