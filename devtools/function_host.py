"""Drive the functions that ``function_app.app`` registers, in-process.

Functions Core Tools cannot run here, so this plays the host's part: it reads each
function's HTTP trigger binding (methods, route template, auth level), matches a
request against them with the ``api/`` prefix from host.json, builds a real
Starlette request (what the HTTP streaming extension hands a function) and calls the
registered user function. Queue triggers are indexed too, with their ``%SETTING%``
expressions resolved from the environment as the host resolves them from app
settings; ``devtools.queue_runner`` plays the host's queue listener.
"""

from __future__ import annotations

import inspect
import json
import os
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import azure.functions as func
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

ROUTE_PREFIX = "api"


@dataclass(frozen=True)
class Route:
    name: str
    methods: frozenset[str]
    pattern: re.Pattern[str]
    auth_level: str
    handler: Callable[..., Any]
    template: str = ""  # the binding's route, as written: "runs/{run_id}"


def _compile(template: str) -> re.Pattern[str]:
    regex = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(template))
    return re.compile(f"/{ROUTE_PREFIX}/{regex}")


_SETTING = re.compile(r"%([^%]+)%")


def resolve_setting_expressions(value: str, env: dict[str, str] | None = None) -> str:
    """``%RUNS_QUEUE%-poison`` → ``runs-poison``; a missing setting is an error, as in the host."""
    source = os.environ if env is None else env

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in source:
            raise LookupError(f"The binding expression %{name}% names an app setting that is not set.")
        return source[name]

    return _SETTING.sub(one, value)


@dataclass(frozen=True)
class Trigger:
    """A non-HTTP function: its trigger binding and the user function."""

    name: str
    binding: dict[str, Any]
    handler: Callable[..., Any]

    @property
    def queue_name(self) -> str | None:
        """The queue a queueTrigger listens on, expressions resolved; None for other kinds."""
        if self.binding.get("type") != "queueTrigger":
            return None
        return resolve_setting_expressions(self.binding["queueName"])


@dataclass(frozen=True)
class Index:
    routes: list[Route]
    triggers: dict[str, Trigger]


_indexed: dict[int, tuple[func.FunctionApp, Index]] = {}


def index_of(app: func.FunctionApp) -> Index:
    """Index ``app`` once, like the host does at start-up (indexing twice is an error)."""
    if id(app) not in _indexed:
        _indexed[id(app)] = (app, _index(app))
    return _indexed[id(app)][1]


def _index(app: func.FunctionApp) -> Index:
    routes: list[Route] = []
    triggers: dict[str, Trigger] = {}
    for function in app.get_functions():
        name = function.get_function_name()
        for binding in (json.loads(raw) for raw in function.get_raw_bindings()):
            kind = binding.get("type", "")
            if binding.get("direction") != "IN" or not kind.endswith("Trigger"):
                continue
            if kind != "httpTrigger":
                triggers[name] = Trigger(name, binding, function.get_user_function())
                continue
            routes.append(
                Route(
                    name=name,
                    methods=frozenset(m.upper() for m in binding.get("methods", [])),
                    pattern=_compile(binding["route"]),
                    auth_level=binding.get("authLevel", "FUNCTION"),
                    handler=function.get_user_function(),
                    template=binding["route"],
                )
            )
    return Index(routes, triggers)


@dataclass
class HostResponse:
    status: int
    headers: dict[str, str]
    response: Response

    @property
    def is_stream(self) -> bool:
        return isinstance(self.response, StreamingResponse)

    async def chunks(self) -> AsyncIterator[bytes]:
        if isinstance(self.response, StreamingResponse):
            async for chunk in self.response.body_iterator:
                yield chunk if isinstance(chunk, bytes) else str(chunk).encode()
        else:
            yield bytes(self.response.body)

    async def body(self) -> bytes:
        return b"".join([c async for c in self.chunks()])

    async def json(self) -> Any:
        return json.loads(await self.body())

    async def events(self) -> AsyncIterator[tuple[str, Any]]:
        """Parse the SSE stream into (event, data) pairs as frames arrive."""
        buffer = b""
        async for chunk in self.chunks():
            buffer += chunk
            while b"\n\n" in buffer:
                frame, buffer = buffer.split(b"\n\n", 1)
                fields = dict(line.split(": ", 1) for line in frame.decode().splitlines())
                yield fields["event"], json.loads(fields["data"])


class FunctionHost:
    def __init__(self, app: func.FunctionApp) -> None:
        index = index_of(app)
        self.routes = index.routes
        self.triggers = index.triggers

    def queue_triggers(self) -> list[Trigger]:
        """The app's queueTrigger functions, in registration order."""
        return [t for t in self.triggers.values() if t.binding.get("type") == "queueTrigger"]

    async def invoke_queue_trigger(self, name: str, message: func.QueueMessage) -> None:
        """Call the queue-triggered function ``name`` with ``message``, as the host would.

        An exception propagates: that is how the host learns a delivery failed.
        """
        trigger = self.triggers.get(name)
        if trigger is None or trigger.queue_name is None:
            raise LookupError(f"{name!r} is not a queue-triggered function of this app.")
        result = trigger.handler(message)
        if inspect.isawaitable(result):  # a sync function is allowed too
            await result

    def match(self, method: str, path: str) -> tuple[Route, dict[str, str]] | None:
        for route in self.routes:
            found = route.pattern.fullmatch(path)
            if found and method.upper() in route.methods:
                return route, found.groupdict()
        return None

    async def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        query: str = "",
    ) -> HostResponse:
        """``path`` is the decoded path (a route parameter may hold any character, as after
        percent-decoding); the query string, already encoded, goes in ``query``."""
        if json_body is not None:
            body = json.dumps(json_body).encode()
        body = body or b""
        all_headers = {"content-length": str(len(body)), **{k.lower(): v for k, v in (headers or {}).items()}}
        if json_body is not None:
            all_headers.setdefault("content-type", "application/json")
        matched = self.match(method, path)
        if matched is None:
            return HostResponse(404, {}, Response(status_code=404))
        route, path_params = matched
        request = Request(_scope(method, path, all_headers, path_params, query), _receiver(body))
        response: Response = await route.handler(request)
        return HostResponse(response.status_code, dict(response.headers), response)


def _scope(
    method: str, path: str, headers: dict[str, str], path_params: dict[str, str], query: str = ""
) -> dict[str, Any]:
    return {
        "type": "http",
        "http_version": "1.1",
        "method": method.upper(),
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode("latin-1"),
        "root_path": "",
        "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 7071),
        "path_params": path_params,
    }


def _receiver(body: bytes) -> Callable[[], Any]:
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return {"type": "http.disconnect"}

    return receive
