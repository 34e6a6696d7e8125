"""AG-UI (``POST /api/ag-ui``): a thin translator from ``RunAgentInput`` to one thread turn.

``threadId`` is the thread; a run is a turn through the same factory, owner and stream as
``POST /api/threads/{id}/runs``; a pending request is an interrupt. See ``docs/ag-ui.md``.
"""

from functions_adapter.ag_ui.route import handle_run

__all__ = ["handle_run"]
