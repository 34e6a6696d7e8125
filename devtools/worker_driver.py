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

The protobuf messages are built at run time from ``_SCHEMA``: the subset of the language
worker protocol (``FunctionRpc.proto`` and ``shared/NullableTypes.proto``, package
``AzureFunctionsRpcMessages``) that the library and this driver touch, with the official
field names and numbers. ``RpcHttp.identities`` (claims identities) is left out.
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
from types import SimpleNamespace
from typing import Any

import aiohttp
import azure_functions_runtime as library
from google.protobuf import descriptor_pb2, descriptor_pool, duration_pb2, message_factory, timestamp_pb2

PACKAGE = "AzureFunctionsRpcMessages"

_SCHEMA = """
message StreamingMessage {
  string request_id = 1;
  oneof content {
    InvocationRequest invocation_request = 4;
    InvocationResponse invocation_response = 5;
    WorkerInitResponse worker_init_response = 16;
    WorkerInitRequest worker_init_request = 17;
    FunctionEnvironmentReloadRequest function_environment_reload_request = 25;
    FunctionEnvironmentReloadResponse function_environment_reload_response = 26;
    FunctionsMetadataRequest functions_metadata_request = 29;
    FunctionMetadataResponse function_metadata_response = 30;
  }
}
message WorkerInitRequest {
  string host_version = 1;
  map<string, string> capabilities = 2;
  map<string, RpcLog.Level> log_categories = 3;
  string worker_directory = 4;
  string function_app_directory = 5;
}
message WorkerInitResponse {
  string worker_version = 1;
  map<string, string> capabilities = 2;
  StatusResult result = 3;
  WorkerMetadata worker_metadata = 4;
}
message WorkerMetadata {
  string runtime_name = 1;
  string runtime_version = 2;
  string worker_version = 3;
  string worker_bitness = 4;
  map<string, string> custom_properties = 5;
}
message StatusResult {
  enum Status { Failure = 0; Success = 1; Cancelled = 2; }
  Status status = 4;
  string result = 1;
  RpcException exception = 2;
  repeated RpcLog logs = 3;
}
message FunctionEnvironmentReloadRequest {
  map<string, string> environment_variables = 1;
  string function_app_directory = 2;
}
message FunctionEnvironmentReloadResponse {
  WorkerMetadata worker_metadata = 1;
  map<string, string> capabilities = 2;
  StatusResult result = 3;
}
message RpcFunctionMetadata {
  string name = 4;
  string directory = 1;
  string script_file = 2;
  string entry_point = 3;
  map<string, BindingInfo> bindings = 6;
  bool is_proxy = 7;
  StatusResult status = 8;
  string language = 9;
  repeated string raw_bindings = 10;
  string function_id = 13;
  bool managed_dependency_enabled = 14;
  RpcRetryOptions retry_options = 15;
  map<string, string> properties = 16;
}
message FunctionsMetadataRequest {
  string function_app_directory = 1;
}
message FunctionMetadataResponse {
  repeated RpcFunctionMetadata function_metadata_results = 1;
  StatusResult result = 2;
  bool use_default_metadata_indexing = 3;
}
message InvocationRequest {
  string invocation_id = 1;
  string function_id = 2;
  repeated ParameterBinding input_data = 3;
  map<string, TypedData> trigger_metadata = 4;
  RpcTraceContext trace_context = 5;
  RetryContext retry_context = 6;
}
message RpcTraceContext {
  string trace_parent = 1;
  string trace_state = 2;
  map<string, string> attributes = 3;
}
message RetryContext {
  int32 retry_count = 1;
  int32 max_retry_count = 2;
  RpcException exception = 3;
}
message InvocationResponse {
  string invocation_id = 1;
  repeated ParameterBinding output_data = 2;
  TypedData return_value = 4;
  StatusResult result = 3;
}
message TypedData {
  oneof data {
    string string = 1;
    string json = 2;
    bytes bytes = 3;
    bytes stream = 4;
    RpcHttp http = 5;
    sint64 int = 6;
    double double = 7;
    CollectionBytes collection_bytes = 8;
    CollectionString collection_string = 9;
    CollectionDouble collection_double = 10;
    CollectionSInt64 collection_sint64 = 11;
    ModelBindingData model_binding_data = 12;
    CollectionModelBindingData collection_model_binding_data = 13;
  }
}
enum RpcDataType {
  unknown = 0; string = 1; json = 2; bytes = 3; stream = 4; http = 5; int = 6; double = 7;
  collection_bytes = 8; collection_string = 9; collection_double = 10; collection_sint64 = 11;
}
message RpcSharedMemory {
  string name = 1;
  int64 offset = 2;
  int64 count = 3;
  RpcDataType type = 4;
}
message CollectionString {
  repeated string string = 1;
}
message CollectionBytes {
  repeated bytes bytes = 1;
}
message CollectionDouble {
  repeated double double = 1;
}
message CollectionSInt64 {
  repeated sint64 sint64 = 1;
}
message ParameterBinding {
  string name = 1;
  oneof rpc_data {
    TypedData data = 2;
    RpcSharedMemory rpc_shared_memory = 3;
  }
}
message BindingInfo {
  enum Direction { in = 0; out = 1; inout = 2; }
  enum DataType { undefined = 0; string = 1; binary = 2; stream = 3; }
  string type = 2;
  Direction direction = 3;
  DataType data_type = 4;
  map<string, string> properties = 5;
}
message RpcLog {
  enum Level { Trace = 0; Debug = 1; Information = 2; Warning = 3; Error = 4; Critical = 5; None = 6; }
  enum RpcLogCategory { User = 0; System = 1; CustomMetric = 2; }
  string invocation_id = 1;
  string category = 2;
  Level level = 3;
  string message = 4;
  string event_id = 5;
  RpcException exception = 6;
  string properties = 7;
  RpcLogCategory log_category = 8;
  map<string, TypedData> propertiesMap = 9;
}
message RpcException {
  string source = 3;
  string stack_trace = 1;
  string message = 2;
  bool is_user_exception = 4;
  string type = 5;
}
message RpcHttpCookie {
  enum SameSite { None = 0; Lax = 1; Strict = 2; ExplicitNone = 3; }
  string name = 1;
  string value = 2;
  NullableString domain = 3;
  NullableString path = 4;
  NullableTimestamp expires = 5;
  NullableBool secure = 6;
  NullableBool http_only = 7;
  SameSite same_site = 8;
  NullableDouble max_age = 9;
}
message RpcHttp {
  string method = 1;
  string url = 2;
  map<string, string> headers = 3;
  TypedData body = 4;
  map<string, string> params = 10;
  string status_code = 12;
  map<string, string> query = 15;
  bool enable_content_negotiation = 16;
  TypedData rawBody = 17;
  repeated RpcHttpCookie cookies = 19;
  map<string, NullableString> nullable_headers = 20;
  map<string, NullableString> nullable_params = 21;
  map<string, NullableString> nullable_query = 22;
}
message ModelBindingData {
  string version = 1;
  string source = 2;
  string content_type = 3;
  bytes content = 4;
}
message CollectionModelBindingData {
  repeated ModelBindingData model_binding_data = 1;
}
message RpcRetryOptions {
  enum RetryStrategy { exponential_backoff = 0; fixed_delay = 1; }
  int32 max_retry_count = 2;
  google.protobuf.Duration delay_interval = 3;
  google.protobuf.Duration minimum_interval = 4;
  google.protobuf.Duration maximum_interval = 5;
  RetryStrategy retry_strategy = 6;
}
message NullableString {
  oneof string {
    string value = 1;
  }
}
message NullableDouble {
  oneof double {
    double value = 1;
  }
}
message NullableBool {
  oneof bool {
    bool value = 1;
  }
}
message NullableTimestamp {
  oneof timestamp {
    google.protobuf.Timestamp value = 1;
  }
}
"""

_FDP = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    "string": _FDP.TYPE_STRING,
    "bytes": _FDP.TYPE_BYTES,
    "bool": _FDP.TYPE_BOOL,
    "int32": _FDP.TYPE_INT32,
    "int64": _FDP.TYPE_INT64,
    "sint64": _FDP.TYPE_SINT64,
    "double": _FDP.TYPE_DOUBLE,
}
_FIELD = re.compile(r"(repeated )?(map<(\w+), ([\w.]+)>|[\w.]+) (\w+) = (\d+);")
_ENUM = re.compile(r"enum (\w+) \{(.*)\}")


def _build_file() -> descriptor_pb2.FileDescriptorProto:
    """Parse ``_SCHEMA`` (proto3 syntax, one declaration a line) into a file descriptor."""
    file = descriptor_pb2.FileDescriptorProto(
        name="azure_functions_rpc_subset.proto",
        package=PACKAGE,
        syntax="proto3",
        dependency=["google/protobuf/duration.proto", "google/protobuf/timestamp.proto"],
    )
    enums = {m.group(1) for m in re.finditer(r"enum (\w+)", _SCHEMA)}
    one_line_enums = re.sub(r"enum (\w+) \{([^}]*)\}", lambda m: f"enum {m[1]} {{{' '.join(m[2].split())}}}", _SCHEMA)
    message: descriptor_pb2.DescriptorProto | None = None
    oneof: int | None = None
    for line in (raw.strip() for raw in one_line_enums.splitlines()):
        if enum_match := _ENUM.fullmatch(line):
            enum = (message.enum_type if message is not None else file.enum_type).add(name=enum_match.group(1))
            for pair in filter(None, (p.strip() for p in enum_match.group(2).split(";"))):
                value_name, number = (s.strip() for s in pair.split("="))
                enum.value.add(name=value_name, number=int(number))
        elif line.startswith("message "):
            message = file.message_type.add(name=line.split()[1])
        elif line.startswith("oneof ") and message is not None:
            oneof = len(message.oneof_decl)
            message.oneof_decl.add(name=line.split()[1])
        elif line == "}":
            message, oneof = (message, None) if oneof is not None else (None, None)
        elif line:
            if message is None:
                raise ValueError(f"field outside a message: {line!r}")
            _add_field(message, line, oneof, enums)
    return file


def _add_field(message: descriptor_pb2.DescriptorProto, line: str, oneof: int | None, enums: set[str]) -> None:
    found = _FIELD.fullmatch(line)
    if found is None:
        raise ValueError(f"cannot parse schema line: {line!r}")
    repeated, type_name, key, value, name, number = found.groups()
    target = message.field.add(name=name, number=int(number), label=_FDP.LABEL_OPTIONAL)
    if oneof is not None:
        target.oneof_index = oneof
    if key is None:
        if repeated:
            target.label = _FDP.LABEL_REPEATED
        _set_type(target, type_name, message, enums)
        return
    # map<K, V> is a repeated nested XxxEntry message with map_entry set.
    entry = message.nested_type.add(name=name[0].upper() + _camel(name[1:]) + "Entry")
    entry.options.map_entry = True
    _set_type(entry.field.add(name="key", number=1, label=_FDP.LABEL_OPTIONAL), key, message, enums)
    _set_type(entry.field.add(name="value", number=2, label=_FDP.LABEL_OPTIONAL), value, message, enums)
    target.label = _FDP.LABEL_REPEATED
    target.type = _FDP.TYPE_MESSAGE
    target.type_name = f".{PACKAGE}.{message.name}.{entry.name}"


def _set_type(
    target: descriptor_pb2.FieldDescriptorProto, name: str, message: descriptor_pb2.DescriptorProto, enums: set[str]
) -> None:
    if name in _SCALARS:
        target.type = _SCALARS[name]
        return
    if name.startswith("google.protobuf."):
        target.type, target.type_name = _FDP.TYPE_MESSAGE, f".{name}"
        return
    target.type = _FDP.TYPE_ENUM if name.rsplit(".", 1)[-1] in enums else _FDP.TYPE_MESSAGE
    own = name in {e.name for e in message.enum_type}  # an enum declared in this message
    target.type_name = f".{PACKAGE}.{message.name}.{name}" if own else f".{PACKAGE}.{name}"


def _camel(snake: str) -> str:
    return re.sub(r"_(\w)", lambda m: m.group(1).upper(), snake)


def build_protos() -> SimpleNamespace:
    """Message classes by name, like the proxy worker's ``protos`` module."""
    pool = descriptor_pool.DescriptorPool()
    for dependency in (duration_pb2, timestamp_pb2):
        proto = descriptor_pb2.FileDescriptorProto()
        dependency.DESCRIPTOR.CopyToProto(proto)
        pool.Add(proto)
    file = _build_file()
    pool.Add(file)
    return SimpleNamespace(
        **{
            m.name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{m.name}"))
            for m in file.message_type
        }
    )


protos = build_protos()


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
    ) -> Any:
        """Send an InvocationRequest; return the InvocationResponse as the host receives it."""
        message = protos.StreamingMessage(
            request_id=str(uuid.uuid4()),
            invocation_request=protos.InvocationRequest(
                invocation_id=invocation_id or str(uuid.uuid4()),
                function_id=function_id,
                input_data=input_data,
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
