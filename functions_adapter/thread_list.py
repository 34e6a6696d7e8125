"""``GET /api/threads?prefix=&limit=&cursor=``: the threads a caller may use, a page at a time.

Parsing and authorization only; the listing itself is ``resumable.threads.listing``. With
``THREAD_AUTHORIZER`` set, the hook is asked about every listed thread (route ``list``,
with that thread's metadata) and a refused thread is left out of the page, not reported:
a page may then hold fewer than ``limit`` threads and still carry a ``next_cursor``.
"""

from __future__ import annotations

from fastapi import Request, Response

from resumable.base.errors import Forbidden, InvalidRequest
from resumable.base.ids import is_ascii_digits
from resumable.threads.listing import MAX_LIST_PAGE, ThreadSummary, list_threads

from .authorization import authorize
from .request_trace import traced
from .responses import json_response
from .wiring import build_service, container_for, load_settings

ROUTE = "list"
DEFAULT_LIMIT = 20


def bounded_limit(raw: str | None) -> int:
    """``limit`` from 1 to ``MAX_LIST_PAGE``; 400 naming it otherwise. Digits are counted
    before ``int()`` (thousands of digits are slow, over 4,300 raise). The same rule as the
    history route's; ``params.whole_number`` once the one parser is on main."""
    if raw is None:
        return DEFAULT_LIMIT
    significant = raw.lstrip("0") or "0"
    if (
        not is_ascii_digits(raw)
        or len(significant) > len(str(MAX_LIST_PAGE))
        or not 1 <= int(significant) <= MAX_LIST_PAGE
    ):
        raise InvalidRequest(f"'limit' must be a whole number from 1 to {MAX_LIST_PAGE}.", details={"param": "limit"})
    return int(significant)


async def handle_list(request: Request) -> Response:
    return await traced(request, "threads", lambda: _list(request))


async def _list(request: Request) -> Response:
    settings = load_settings()
    query = request.query_params
    limit = bounded_limit(query.get("limit"))
    spec = settings.thread_authorizer

    async def allow(summary: ThreadSummary) -> bool:
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
        allow=allow if spec else None,
    )
    return json_response({"threads": [summary.to_json() for summary in page], "next_cursor": cursor})
