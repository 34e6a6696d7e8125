"""Play the Functions host against the real Python 3.13+ worker library, ``azure-functions-runtime``.

Core Tools (the host) cannot be installed here, but on Python 3.13 the worker that runs the
app is a PyPI library. In production the host talks gRPC to a thin "proxy worker" (shipped
with the host, not on PyPI), which parses each ``StreamingMessage`` and calls the library's
``worker_init_request`` / ``functions_metadata_request`` / ``invocation_request`` with a
``WorkerRequest(name, request=<the StreamingMessage>, properties={"protos": ..., "host": ...})``.
This module plays both: it builds the messages the host sends, passes each through the
protobuf wire format (as gRPC would), and hands them to the library the way the proxy does.

HTTP goes the way it goes with the streaming extension: the library starts the extension's
uvicorn server and advertises it as the ``HttpUri`` capability; for each request the host
forwards the raw HTTP request there with an ``x-ms-invocation-id`` header, and sends an
invocation whose ``RpcHttp`` carries only the route parameters (``RequiresRouteParameters``).

The protobuf messages (``protos``) come from ``devtools/rpc_protos.py``, which builds them at
run time from ``devtools/function_rpc_subset.proto``: the subset of the language worker
protocol that the library and this driver touch, with the official field names and numbers.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import azure_functions_runtime as library

from devtools.rpc_protos import protos

__all__ = ["Exchange", "HttpFunction", "WorkerDriver", "WorkerRequest", "protos"]


@dataclass
class WorkerRequest:
    """What the proxy worker hands the library: the message and, at init, ``protos`` and the host."""

    name: str
    request: Any
    properties: dict[str, Any] | None = None


def _over_the_wire(message: Any) -> Any:
    """Serialize and parse a message, as its trip through gRPC does."""
    return type(message).FromString(message.SerializeToString())


@dataclass(frozen=True)
class HttpFunction:
    """An HTTP-triggered function as the host routes it: from the worker's metadata."""

    function_id: str
    name: str
    trigger_name: str
    route: str
    methods: frozenset[str]
    auth_level: str
    pattern: re.Pattern[str]


@dataclass
class Exchange:
    """One HTTP call through the worker: the worker's HTTP response and the invocation's result."""

    function: HttpFunction
    response: aiohttp.ClientResponse
    invocation: asyncio.Task[Any]


@dataclass
class WorkerDriver:
    """The host side of one worker: init, indexing, invocations, HTTP forwarding."""

    app_dir: Path
    host: str = "127.0.0.1"
    route_prefix: str = "api"
    http_uri: str = ""
    capabilities: dict[str, str] = field(default_factory=dict)
    init_response: Any = None
    metadata_response: Any = None
    metadata: list[Any] = field(default_factory=list)
    _session: aiohttp.ClientSession | None = None
    _server_tasks: set[asyncio.Task[Any]] = field(default_factory=set)

    async def start(self) -> Any:
        """WorkerInitRequest (the library indexes the app here), then FunctionsMetadataRequest."""
        before = asyncio.all_tasks()
        library.start_threadpool_executor()  # the proxy does this before every init
        init = protos.StreamingMessage(
            request_id=str(uuid.uuid4()),
            worker_init_request=protos.WorkerInitRequest(
                host_version="4.1040.300",
                # The library reads only FunctionDataCache from the host's capabilities.
                capabilities={},
                worker_directory=str(Path(library.__file__).parent),
                function_app_directory=str(self.app_dir),
            ),
        )
        with _fresh_import("function_app"):
            response = await library.worker_init_request(
                WorkerRequest("WorkerInitRequest", _over_the_wire(init), {"protos": protos, "host": self.host})
            )
        self._server_tasks = asyncio.all_tasks() - before
        init_response = _over_the_wire(protos.StreamingMessage(worker_init_response=response)).worker_init_response
        self.init_response = init_response
        self.capabilities = dict(init_response.capabilities)
        self.http_uri = self.capabilities.get("HttpUri", "")
        metadata_request = protos.StreamingMessage(
            request_id=str(uuid.uuid4()),
            functions_metadata_request=protos.FunctionsMetadataRequest(function_app_directory=str(self.app_dir)),
        )
        reply = await library.functions_metadata_request(
            WorkerRequest("WorkerMetadataRequest", _over_the_wire(metadata_request))
        )
        self.metadata_response = _over_the_wire(
            protos.StreamingMessage(function_metadata_response=reply)
        ).function_metadata_response
        self.metadata = list(self.metadata_response.function_metadata_results)
        self._session = aiohttp.ClientSession()
        if self.http_uri:
            await self._wait_until_listening()
        return init_response

    async def _wait_until_listening(self) -> None:
        """The library returns HttpUri before its server task has bound the port; a request
        sent earlier is refused, so wait for the port (the host forwards only later anyway)."""
        host, port = self.http_uri.removeprefix("http://").rsplit(":", 1)
        deadline = asyncio.get_running_loop().time() + 10
        while True:
            try:
                _, writer = await asyncio.open_connection(host, int(port))
            except OSError:
                if asyncio.get_running_loop().time() > deadline:
                    raise
                await asyncio.sleep(0.01)
            else:
                writer.close()
                await writer.wait_closed()
                return

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
        # The extension's uvicorn server: the library keeps no handle on it, but its task's
        # coroutine (WebServer.serve) holds the uvicorn.Server, which can shut down cleanly.
        for task in self._server_tasks:
            frame = getattr(task.get_coro(), "cr_frame", None)
            server = frame.f_locals.get("server") if frame is not None else None
            if server is not None and hasattr(server, "should_exit"):
                server.should_exit = True
            else:
                task.cancel()
        await asyncio.wait_for(asyncio.gather(*self._server_tasks, return_exceptions=True), 10)
        library.stop_threadpool_executor()

    def bindings(self, name: str) -> list[dict[str, Any]]:
        """The raw bindings the worker reported for function ``name``."""
        (function,) = [m for m in self.metadata if m.name == name]
        return [json.loads(raw) for raw in function.raw_bindings]

    def function_id(self, name: str) -> str:
        (function,) = [m for m in self.metadata if m.name == name]
        return str(function.function_id)

    def http_functions(self) -> list[HttpFunction]:
        """The HTTP routes, as the host builds them from the metadata (``routePrefix`` from host.json)."""
        found = []
        for function in self.metadata:
            for binding in (json.loads(raw) for raw in function.raw_bindings):
                if binding.get("type") != "httpTrigger":
                    continue
                regex = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(binding["route"]))
                found.append(
                    HttpFunction(
                        function_id=function.function_id,
                        name=function.name,
                        trigger_name=binding["name"],
                        route=binding["route"],
                        methods=frozenset(m.upper() for m in binding.get("methods", [])),
                        auth_level=str(binding.get("authLevel", "")),
                        pattern=re.compile(f"/{self.route_prefix}/{regex}"),
                    )
                )
        return found

    def route(self, method: str, path: str) -> tuple[HttpFunction, dict[str, str]]:
        for function in self.http_functions():
            matched = function.pattern.fullmatch(path)
            if matched and method.upper() in function.methods:
                return function, matched.groupdict()
        raise LookupError(f"no function for {method} {path}")

    async def invoke(
        self,
        function_id: str,
        input_data: list[Any],
        invocation_id: str | None = None,
        trigger_metadata: dict[str, Any] | None = None,
    ) -> Any:
        """Send an InvocationRequest; return the InvocationResponse as the host receives it."""
        message = protos.StreamingMessage(
            request_id=str(uuid.uuid4()),
            invocation_request=protos.InvocationRequest(
                invocation_id=invocation_id or str(uuid.uuid4()),
                function_id=function_id,
                input_data=input_data,
                trigger_metadata=trigger_metadata or {},
                trace_context=protos.RpcTraceContext(
                    trace_parent=f"00-{uuid.uuid4().hex}-{uuid.uuid4().hex[:16]}-01", trace_state=""
                ),
                retry_context=protos.RetryContext(retry_count=0, max_retry_count=0),
            ),
        )
        reply = await library.invocation_request(WorkerRequest("FunctionInvocationRequest", _over_the_wire(message)))
        return _over_the_wire(protos.StreamingMessage(invocation_response=reply)).invocation_response

    @asynccontextmanager
    async def http(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        headers: dict[str, str] | None = None,
        send_route_params: bool = True,
    ) -> AsyncIterator[Exchange]:
        """Forward one request to the worker's HTTP server and send its invocation, as the host does.

        ``send_route_params=False`` leaves ``RpcHttp.params`` empty, to show where
        ``request.path_params`` comes from.
        """
        assert self._session is not None, "start() first"
        function, route_params = self.route(method, path)
        invocation_id = str(uuid.uuid4())
        trigger = protos.TypedData(http=protos.RpcHttp(params=route_params if send_route_params else {}))
        invocation = asyncio.create_task(
            self.invoke(
                function.function_id, [protos.ParameterBinding(name=function.trigger_name, data=trigger)], invocation_id
            )
        )
        forwarded = {**(headers or {}), "x-ms-invocation-id": invocation_id}
        data = None if json_body is None else json.dumps(json_body).encode()
        if data is not None:
            forwarded.setdefault("Content-Type", "application/json")
        try:
            async with self._session.request(
                method, f"{self.http_uri}{path}", data=data, headers=forwarded
            ) as response:
                yield Exchange(function, response, invocation)
        except BaseException:
            invocation.cancel()  # it waits for a request that may never have arrived
            raise
        await invocation


@contextmanager
def _fresh_import(module: str) -> Iterator[None]:
    """The worker imports the app in a fresh process; here the test process may have imported
    it already (and indexing one ``FunctionApp`` twice is an error), so the worker gets its own
    module object and the test's is put back afterwards."""
    earlier = sys.modules.pop(module, None)
    try:
        yield
    finally:
        if earlier is not None:
            sys.modules[module] = earlier
        else:
            sys.modules.pop(module, None)
