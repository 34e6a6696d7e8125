"""The app's HTTP functions as one ASGI app on uvicorn, as the HTTP streaming extension serves them.

With the extension on, the Python worker runs a FastAPI app on uvicorn and the host
proxies each request to it; a function gets a Starlette request and may answer with a
streaming response, which crosses the socket chunk by chunk. ``asgi_app`` mounts every
registered HTTP trigger on ``/api/<route>`` (host.json's prefix), and ``served`` runs
any ASGI app on uvicorn on a loopback port. The function-key check is skipped, as
``func start`` skips it. ``scripts/serve.sh`` and the socket-level tests both use them.

With ``admin=True`` the app also answers Core Tools' ``POST /admin/functions/{name}``
(body ``{"input": "..."}``): it invokes a queue or timer function now, without waiting
for a message or the schedule, and answers 202 at once, as the host does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any

import uvicorn
from azure.functions.queue import QueueMessage
from fastapi import FastAPI
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp

from devtools.function_host import ROUTE_PREFIX, FunctionHost, Route
from devtools.timers import invoke_timer

logger = logging.getLogger(__name__)


def _endpoint(route: Route) -> Callable[[Request], Coroutine[Any, Any, Response]]:
    async def endpoint(request: Request) -> Response:
        response: Response = await route.handler(request)
        return response

    endpoint.__name__ = route.name
    return endpoint


def _error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status, headers=headers)


def _unrouted(host: FunctionHost, admin: bool) -> Callable[[Request, Exception], Coroutine[Any, Any, Response]]:
    """FastAPI's own 404 and 405 (``{"detail": ...}``) in the app's documented error shape.

    ``Allow`` names every method of every function on the path: GET and DELETE on
    ``threads/{thread_id}`` are two functions, and Starlette would name only the first.
    (In Azure the Functions host answers these itself, before the app sees them.)
    """

    async def handler(request: Request, exc: Exception) -> Response:
        path, method = request.url.path, request.method
        allowed = {m for r in host.routes if r.pattern.fullmatch(path) for m in r.methods}
        if admin and path.startswith("/admin/functions/") and path.count("/") == 3:
            allowed.add("POST")
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        if status == 405 and allowed:
            methods = ", ".join(sorted(allowed))
            message = f"{path} answers {methods}, not {method}."
            return _error(405, "method_not_allowed", message, {"Allow": methods})
        if status == 404:
            return _error(404, "not_found", f"No function of this app answers {method} {path}.")
        return _error(status, "invalid_request", "The request could not be routed.")

    return handler


class AdminInvocations:
    """Runs admin-invoked functions in the background and keeps them until they finish."""

    def __init__(self, host: FunctionHost) -> None:
        self._host = host
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, name: str, payload: str) -> str | None:
        """Start function ``name`` (any case) with ``payload``; the function's name, or None
        if the app has no such non-HTTP function."""
        trigger = next((t for t in self._host.triggers.values() if t.name.lower() == name.lower()), None)
        if trigger is None:
            return None
        kind = trigger.binding.get("type")
        if kind == "queueTrigger":
            message = QueueMessage(id=str(uuid.uuid4()), body=payload.encode(), dequeue_count=1)
            work = self._host.invoke_queue_trigger(trigger.name, message)
        elif kind == "timerTrigger":
            work = invoke_timer(self._host, trigger.name)
        else:
            return None
        task = asyncio.get_running_loop().create_task(self._run(trigger.name, work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return trigger.name

    async def _run(self, name: str, work: Coroutine[Any, Any, None]) -> None:
        try:
            await work
            logger.info("Executed '%s' (admin invocation)", name)
        except Exception:  # the host logs a failed invocation; nobody waits for its result
            logger.exception("Admin invocation of %s failed", name)

    async def stop(self) -> None:
        """Cancel what is still running (a shutdown)."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def asgi_app(host: FunctionHost, *, admin: bool = False) -> FastAPI:
    """Every HTTP function of ``host`` on ``/api/<route>``; with ``admin``, the admin endpoint
    too (its invocations are ``app.state.invocations``)."""
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    app.add_exception_handler(HTTPException, _unrouted(host, admin))
    for route in host.routes:
        app.add_api_route(f"/{ROUTE_PREFIX}/{route.template}", _endpoint(route), methods=sorted(route.methods))
    if admin:
        invocations = AdminInvocations(host)
        app.state.invocations = invocations

        async def invoke(request: Request) -> Response:
            try:
                payload = json.loads(await request.body() or b"{}").get("input", "")
            except (ValueError, AttributeError):
                return _error(400, "invalid_body", 'The body must be JSON: {"input": "..."}.')
            if not isinstance(payload, str):
                payload = json.dumps(payload)
            if invocations.start(request.path_params["name"], payload) is None:
                return _error(404, "function_not_found", "No queue or timer function of this app has that name.")
            return Response(status_code=202)

        app.add_api_route("/admin/functions/{name}", invoke, methods=["POST"])
    return app


class _ShutdownCancellations(logging.Filter):
    """uvicorn logs a request that its graceful shutdown had to cancel (a stream still open
    at Ctrl+C) as "Exception in ASGI application" with the ``CancelledError``'s traceback.
    That is the shutdown working as meant (the run is cancelled, nothing is saved), so it
    is said in one line instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        kind = record.exc_info[0] if record.exc_info else None
        if kind is not None and issubclass(kind, asyncio.CancelledError):
            record.msg, record.args, record.exc_info, record.exc_text = _CANCELLED, (), None, None
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


_CANCELLED = "A request still open at shutdown was cancelled (a stream's run saves nothing)."


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: whoever runs ``served`` decides when to stop
    (uvicorn would otherwise re-raise the signal once it has shut down)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def served(
    app: ASGIApp,
    *,
    port: int = 0,
    log_level: str = "warning",
    access_log: bool = False,
    sock: socket.socket | None = None,
) -> AsyncIterator[str]:
    """Serve ``app`` on 127.0.0.1 (port 0 picks a free one), or on ``sock``, a socket bound
    beforehand; yields ``http://127.0.0.1:PORT``.

    On exit, open streams get two seconds to finish, then their tasks are cancelled.
    """
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level=log_level,
        access_log=access_log,
        lifespan="off",
        timeout_graceful_shutdown=2,
    )
    server = _Server(config)
    # Left on: uvicorn logs the cancelled requests after serve() has returned.
    uvicorn_log = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _ShutdownCancellations) for f in uvicorn_log.filters):
        uvicorn_log.addFilter(_ShutdownCancellations())
    task = asyncio.create_task(server.serve(sockets=None if sock is None else [sock]))
    while not server.started:  # uvicorn exposes a flag, not an event
        if task.done():  # it could not bind: raise what it raised (or say so)
            await task
            raise OSError(f"uvicorn could not listen on 127.0.0.1:{port}")
        await asyncio.sleep(0.01)
    bound = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{bound}"
    finally:
        server.should_exit = True
        await task
