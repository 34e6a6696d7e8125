"""``GET /api/threads?prefix=&limit=&cursor=``: the threads a caller may use, a page at a time.

Parsing and authorization only; the listing itself is ``resumable.threads.listing``. A
thread another origin made (``callers.caller_of``: another principal, an adapter's
channel) is left out, as every thread route refuses it. With ``THREAD_AUTHORIZER`` set,
the hook is asked about every listed thread (route ``list``, with that thread's metadata)
and a refused thread is left out of the page, not reported: a page may then hold fewer
than ``limit`` threads and still carry a ``next_cursor``.
"""

from __future__ import annotations

from fastapi import Request, Response

from functions_adapter.callers import authorize, caller_of
from functions_adapter.http_responses import json_response
from functions_adapter.params import whole_number
from functions_adapter.request_trace import traced
from functions_adapter.wiring import build_service, container_for, load_settings
from resumable.base import Forbidden
from resumable.threads import MAX_LIST_PAGE, ThreadSummary, list_threads

ROUTE = "list"
DEFAULT_LIMIT = 20


async def handle_list(request: Request) -> Response:
    return await traced(request, "threads", lambda: _list(request))


async def _list(request: Request) -> Response:
    settings = load_settings()
    query = request.query_params
    limit = whole_number(query.get("limit"), "limit", low=1, high=MAX_LIST_PAGE, default=DEFAULT_LIMIT)
    spec = settings.thread_authorizer
    caller = caller_of(request)

    async def allow(summary: ThreadSummary) -> bool:
        if summary.head is not None and not caller.may_use(summary.head):
            return False  # another origin's thread, as every thread route refuses it
        if not spec:
            return True
        try:
            await authorize(
                spec, route=ROUTE, thread_id=summary.thread_id, headers=request.headers, metadata=summary.metadata
            )
        except Forbidden:
            return False
        return True

    page, cursor = await list_threads(
        container_for(settings),
        build_service(settings).pointers,
        prefix=query.get("prefix") or "",
        limit=limit,
        cursor=query.get("cursor"),
        allow=allow,
    )
    return json_response({"threads": [summary.to_json() for summary in page], "next_cursor": cursor})
