"""The ownership matrix (issue 38 §2.2): every operation of the OpenAPI document, every MCP
tool and every AG-UI input, tried on Alice's data by Alice, by Bob and by a caller without a
principal, with every ID the operation takes (thread, checkpoint, run, response,
conversation, item).

Each row starts from a fresh world of Alice's (a thread of two turns with her secret in
it, a queued background run, a conversation with a stored response, and a stored response
of no thread). Bob and the anonymous caller must get the row's documented refusal, with
nothing of Alice's in the answer and storage exactly as it was (nothing read back to them,
nothing written, nothing run: a run writes a checkpoint). Alice then gets the owner's answer,
so a refusal that refused everyone would fail here too. The rows are keyed by the
operations they cover: an operation, tool or AG-UI input field that is not in the matrix
fails ``test_the_matrix_covers_every_route_tool_and_input``.

``test_no_route_reads_thread_data_past_the_owner_check`` is the other half: the library's
reads of thread data take a ``Caller`` (``resumable/threads/ownership.py``); the few raw
reads left in the adapter are listed here with the check that precedes each.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import RunAgentInput
from azure.core.exceptions import ResourceNotFoundError

from devtools.function_host import FunctionHost
from functions_adapter import wiring
from functions_adapter.mcp.contract import TOOLS
from tests.adapter.test_ag_ui import agui_body, user

ROOT = Path(__file__).resolve().parents[2]
SECRET = "my card number is 4111-1111"
ALICE = {"x-caller": "alice"}
BOB = {"x-caller": "bob"}
NOBODY: dict[str, str] = {}
THREAD = "alice-t1"


@dataclass(frozen=True)
class World:
    """Alice's data, by the IDs a caller could name."""

    first: str  # her thread's first checkpoint (the secret's turn)
    head: str  # its head
    cursor: str  # a history cursor of her thread
    run_id: str  # a queued background run on her thread
    conversation: str
    item: str  # an item of her conversation
    conv_response: str  # a stored response in her conversation
    response: str  # a stored response of no thread
    task: str  # an A2A task of hers that is a synchronous turn (on a thread of its own)


@dataclass(frozen=True)
class Answer:
    status: int
    code: str | None
    text: str


Call = Callable[[FunctionHost, World, dict[str, str]], Awaitable[Answer]]


@dataclass(frozen=True)
class Row:
    """One way to reach Alice's data: the operation it covers, how to call it, what Bob and
    the anonymous caller get, and what Alice gets (None: not tried, e.g. a live stream)."""

    covers: str  # "METHOD /path", "mcp:<tool>", "ag-ui:<field>"
    variant: str
    call: Call
    refusal: tuple[int, str | None]
    owner: tuple[int, ...] | None
    # Who else may be answered (not refused): an operation that takes none of Alice's IDs.
    # Their answer must still hold nothing of hers, and her data must stay as it was.
    open_to_all: bool = False
    # What the answer must not hold (an ID the caller sent may be echoed back to it).
    absent: tuple[str, ...] = field(default=(SECRET,))
    # What Alice's own answer holds: the row reaches her data at all.
    owner_sees: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.covers} [{self.variant}]"


# -- calling ---------------------------------------------------------------------------------


def _code(body: Any) -> str | None:
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return body["error"].get("code")
    return None


async def _http(
    host: FunctionHost, method: str, path: str, headers: dict[str, str], body: Any = None, query: str = ""
) -> Answer:
    answered = await host.request(method, path, json_body=body, headers=headers, query=query)
    text = (await answered.body()).decode()
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    return Answer(answered.status, _code(parsed), text)


def http(method: str, path: str, body: Any = None, query: str = "") -> Call:
    """An HTTP call; ``<name>`` in the path, body and query is filled from the world."""

    async def call(host: FunctionHost, world: World, headers: dict[str, str]) -> Answer:
        ids = {**vars(world), "thread": THREAD}
        sent = None if body is None else json.loads(_fill(json.dumps(body), ids))
        return await _http(host, method, _fill(path, ids), headers, sent, _fill(query, ids))

    return call


def _fill(text: str, ids: dict[str, str]) -> str:
    return re.sub(r"<(\w+)>", lambda m: ids[m.group(1)], text)


def agui(kind: str) -> Call:
    async def call(host: FunctionHost, world: World, headers: dict[str, str]) -> Answer:
        extra: dict[str, Any] = {}
        messages: list[dict[str, Any]] = []
        if kind == "messages":
            messages = [user("what did I say?")]
        elif kind == "resume":
            extra["resume"] = [{"interruptId": "req-1", "status": "resolved", "payload": {"ok": True}}]
        body = json.dumps(agui_body(THREAD, messages, **extra)).encode()
        sent = {"content-type": "application/json", "accept": "text/event-stream", **headers}
        answered = await host.request("POST", "/api/ag-ui", body=body, headers=sent)
        text = (await answered.body()).decode()
        events = [json.loads(f[6:]) for f in text.split("\n\n") if f.startswith("data: ")]
        errors = [e.get("code") for e in events if e.get("type") == "RUN_ERROR"]
        return Answer(answered.status, errors[0] if errors else None, text)

    return call


def mcp(tool: str, arguments: Callable[[World], dict[str, Any]]) -> Call:
    async def call(host: FunctionHost, world: World, headers: dict[str, str]) -> Answer:
        (trigger,) = [t for t in host.triggers.values() if t.binding.get("toolName") == tool]
        transport = {"name": "http", "properties": {"headers": headers}}
        context = {"name": tool, "arguments": arguments(world), "transport": transport}
        envelope = json.loads(await trigger.handler(context=json.dumps(context)))
        result = json.loads(envelope["content"])
        text = json.dumps(result)
        if not result.get("isError"):
            return Answer(200, None, text)
        # The code is in the result's text or its structured content, whichever the contract uses.
        return Answer(0, "forbidden" if re.search(r"\bforbidden\b", text) else None, text)

    return call


def a2a(method: str, params: dict[str, Any]) -> Call:
    """An A2A JSON-RPC call to the default workflow's agent: always 200; our refusal's code is
    in the JSON-RPC error's ``data`` (the HTTP status the same refusal has on the HTTP routes)."""

    async def call(host: FunctionHost, world: World, headers: dict[str, str]) -> Answer:
        ids = {**vars(world), "thread": THREAD}
        sent = json.loads(_fill(json.dumps(params), ids))
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": sent}
        answered = await host.request("POST", "/api/a2a/default", json_body=body, headers=headers)
        text = (await answered.body()).decode()
        frames = [line[6:] for line in text.splitlines() if line.startswith("data: ")] or [text]
        error = json.loads(frames[0]).get("error")
        code = error["data"]["error"]["code"] if isinstance(error, dict) and "data" in error else None
        return Answer(answered.status, code, text)

    return call


def a2a_message(**fields: str) -> dict[str, Any]:
    return {"message": {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "x"}], **fields}}


def own_conversation_items() -> Call:
    """The caller makes a conversation of its own, then pages it after Alice's item."""

    async def call(host: FunctionHost, world: World, headers: dict[str, str]) -> Answer:
        created = await _http(host, "POST", "/api/conversations", headers, {})
        assert created.status == 200, created.text
        own = json.loads(created.text)["id"]
        return await _http(host, "GET", f"/api/conversations/{own}/items", headers, query=f"after={world.item}")

    return call


# -- the rows --------------------------------------------------------------------------------

FORBIDDEN = (403, "forbidden")
IN_THREAD = (409, "checkpoint_in_thread")
STREAM_FORBIDDEN = (200, "forbidden")  # AG-UI: RUN_STARTED, then RUN_ERROR with the code
TOOL_FORBIDDEN = (0, "forbidden")  # an MCP tool error
OK = (200,)

ROWS: list[Row] = [
    # /api/runs: a thread's checkpoint is never resumed outside its thread, for anyone.
    Row(
        "POST /api/runs",
        "checkpoint_id=head",
        http("POST", "/api/runs", {"checkpoint_id": "<head>", "messages": "x"}),
        IN_THREAD,
        (409,),
    ),
    Row(
        "POST /api/runs",
        "checkpoint_id=first, stream",
        http("POST", "/api/runs", {"checkpoint_id": "<first>", "messages": "x", "stream": True}),
        IN_THREAD,
        (409,),
    ),
    Row(
        "POST /api/runs",
        "checkpoint_id=head, background",
        http("POST", "/api/runs", {"checkpoint_id": "<head>", "messages": "x", "background": True}),
        IN_THREAD,
        (409,),
    ),
    Row("GET /api/runs/{run_id}", "run", http("GET", "/api/runs/<run_id>"), FORBIDDEN, OK),
    Row("GET /api/runs/{run_id}/stream", "run", http("GET", "/api/runs/<run_id>/stream"), FORBIDDEN, None),
    Row("POST /api/runs/{run_id}/cancel", "run", http("POST", "/api/runs/<run_id>/cancel"), FORBIDDEN, OK),
    Row(
        "POST /api/threads/{thread_id}/runs",
        "thread",
        http("POST", "/api/threads/<thread>/runs", {"messages": "what did I say?"}),
        FORBIDDEN,
        OK,
    ),
    Row(
        "POST /api/threads/{thread_id}/runs",
        "thread, stream",
        http("POST", "/api/threads/<thread>/runs", {"messages": "x", "stream": True}),
        FORBIDDEN,
        OK,
    ),
    Row(
        "POST /api/threads/{thread_id}/runs",
        "thread, background",
        http("POST", "/api/threads/<thread>/runs", {"messages": "x", "background": True}),
        FORBIDDEN,
        (202,),
    ),
    Row(
        "POST /api/threads/{thread_id}/runs",
        "thread, fork from first",
        http("POST", "/api/threads/<thread>/runs", {"messages": "x", "from_checkpoint_id": "<first>"}),
        FORBIDDEN,
        OK,
    ),
    # The caller's own (new) thread, forked from Alice's checkpoint: not in that thread's lineage.
    Row(
        "POST /api/threads/{thread_id}/runs",
        "own thread, fork from her head",
        http("POST", "/api/threads/own-t/runs", {"messages": "x", "from_checkpoint_id": "<head>"}),
        (409, "checkpoint_not_in_thread"),
        (409,),
    ),
    Row("GET /api/threads/{thread_id}", "thread", http("GET", "/api/threads/<thread>"), FORBIDDEN, OK),
    Row("DELETE /api/threads/{thread_id}", "thread", http("DELETE", "/api/threads/<thread>"), FORBIDDEN, (204,)),
    Row(
        "GET /api/threads/{thread_id}/history",
        "thread",
        http("GET", "/api/threads/<thread>/history", query="include=turn"),
        FORBIDDEN,
        OK,
        owner_sees=(SECRET,),
    ),
    Row(
        "GET /api/threads/{thread_id}/history",
        "thread, from first",
        http("GET", "/api/threads/<thread>/history", query="from=<first>&include=turn"),
        FORBIDDEN,
        OK,
        owner_sees=(SECRET,),
    ),
    Row(
        "GET /api/threads/{thread_id}/history",
        "thread, before cursor",
        http("GET", "/api/threads/<thread>/history", query="before=<cursor>"),
        FORBIDDEN,
        OK,
    ),
    # The caller's own (new) thread, walked from Alice's checkpoint: never into her lineage.
    Row(
        "GET /api/threads/{thread_id}/history",
        "own thread, from her checkpoint",
        http("GET", "/api/threads/own-t/history", query="from=<first>&include=turn"),
        (400, "invalid_request"),
        (400,),
    ),
    Row(
        "PUT /api/threads/{thread_id}/metadata",
        "thread",
        http("PUT", "/api/threads/<thread>/metadata", {"k": "v"}),
        FORBIDDEN,
        OK,
    ),
    Row(
        "GET /api/threads/{thread_id}/checkpoints/{checkpoint_id}/state",
        "thread, head",
        http("GET", "/api/threads/<thread>/checkpoints/<head>/state"),
        FORBIDDEN,
        OK,
    ),
    Row(
        "GET /api/threads/{thread_id}/checkpoints/{checkpoint_id}/state",
        "own thread, her checkpoint",
        http("GET", "/api/threads/own-t/checkpoints/<first>/state"),
        (409, "checkpoint_not_in_thread"),
        (409,),
    ),
    Row(
        "POST /api/threads/{thread_id}/checkpoints/{checkpoint_id}/fork",
        "thread, first",
        http(
            "POST",
            "/api/threads/<thread>/checkpoints/<first>/fork",
            {"messages": "what did I say?", "executor_states": {"memory": {}}},
        ),
        FORBIDDEN,
        OK,
    ),
    Row(
        "POST /api/threads/{thread_id}/checkpoints/{checkpoint_id}/fork",
        "own thread, her checkpoint",
        http(
            "POST",
            "/api/threads/own-t/checkpoints/<first>/fork",
            {"messages": "what did I say?", "executor_states": {"memory": {}}},
        ),
        (409, "checkpoint_not_in_thread"),
        (409,),
    ),
    Row("GET /api/checkpoints/{checkpoint_id}", "head", http("GET", "/api/checkpoints/<head>"), FORBIDDEN, OK),
    Row("GET /api/checkpoints/{checkpoint_id}", "first", http("GET", "/api/checkpoints/<first>"), FORBIDDEN, OK),
    Row(
        "POST /api/responses",
        "conversation",
        http("POST", "/api/responses", {"input": "what did I say?", "conversation": "<conversation>"}),
        FORBIDDEN,
        OK,
    ),
    Row(
        "POST /api/responses",
        "previous_response_id",
        http("POST", "/api/responses", {"input": "what did I say?", "previous_response_id": "<response>"}),
        FORBIDDEN,
        OK,
    ),
    # A conversation's response continued outside it would copy the thread: 409 for Alice too.
    Row(
        "POST /api/responses",
        "previous_response_id in a conversation",
        http("POST", "/api/responses", {"input": "x", "previous_response_id": "<conv_response>"}),
        FORBIDDEN,
        (409,),
    ),
    Row(
        "POST /api/responses",
        "previous_response_id, background",
        http("POST", "/api/responses", {"input": "x", "previous_response_id": "<response>", "background": True}),
        FORBIDDEN,
        OK,
    ),
    Row("GET /api/responses/{response_id}", "response", http("GET", "/api/responses/<response>"), FORBIDDEN, OK),
    Row(
        "GET /api/responses/{response_id}",
        "conversation's response, stream",
        http("GET", "/api/responses/<conv_response>", query="stream=true"),
        FORBIDDEN,
        OK,
    ),
    Row("DELETE /api/responses/{response_id}", "response", http("DELETE", "/api/responses/<response>"), FORBIDDEN, OK),
    Row(
        "POST /api/responses/{response_id}/cancel",
        "response",
        http("POST", "/api/responses/<response>/cancel"),
        FORBIDDEN,
        (400,),
    ),
    Row(
        "GET /api/responses/{response_id}/input_items",
        "response",
        http("GET", "/api/responses/<response>/input_items"),
        FORBIDDEN,
        OK,
    ),
    Row(
        "GET /api/responses/{response_id}/input_items",
        "conversation's response",
        http("GET", "/api/responses/<conv_response>/input_items"),
        FORBIDDEN,
        OK,
    ),
    Row(
        "GET /api/conversations/{conversation_id}",
        "conversation",
        http("GET", "/api/conversations/<conversation>"),
        FORBIDDEN,
        OK,
    ),
    Row(
        "POST /api/conversations/{conversation_id}",
        "conversation",
        http("POST", "/api/conversations/<conversation>", {"metadata": {"k": "v"}}),
        FORBIDDEN,
        OK,
    ),
    Row(
        "DELETE /api/conversations/{conversation_id}",
        "conversation",
        http("DELETE", "/api/conversations/<conversation>"),
        FORBIDDEN,
        OK,
    ),
    Row(
        "GET /api/conversations/{conversation_id}/items",
        "conversation",
        http("GET", "/api/conversations/<conversation>/items"),
        FORBIDDEN,
        OK,
        owner_sees=(SECRET,),
    ),
    Row(
        "GET /api/conversations/{conversation_id}/items",
        "conversation, after item",
        http("GET", "/api/conversations/<conversation>/items", query="after=<item>&order=asc"),
        FORBIDDEN,
        OK,
    ),
    # The caller's own conversation, paged after an item of Alice's: not one of its items.
    Row(
        "GET /api/conversations/{conversation_id}/items",
        "own conversation, after her item",
        own_conversation_items(),
        (400, "invalid_request"),
        (400,),
        open_to_all=True,  # the caller's own conversation is written; nothing of Alice's
    ),
    # Operations that take none of Alice's IDs: answered, never with anything of hers.
    Row(
        "POST /api/conversations",
        "a new one",
        http("POST", "/api/conversations", {}),
        (200, None),
        OK,
        open_to_all=True,
    ),
    Row(
        "GET /api/threads",
        "listing",
        http("GET", "/api/threads"),
        (200, None),
        OK,
        open_to_all=True,
        absent=(SECRET, THREAD),
        owner_sees=(THREAD,),
    ),
    Row(
        "GET /api/threads",
        "listing by prefix",
        http("GET", "/api/threads", query="prefix=alice"),
        (200, None),
        OK,
        open_to_all=True,
        absent=(SECRET, THREAD),
        owner_sees=(THREAD,),
    ),
    Row("GET /api/workflows", "no IDs", http("GET", "/api/workflows"), (200, None), OK, open_to_all=True),
    Row(
        "GET /api/workflows/{name}", "no IDs", http("GET", "/api/workflows/default"), (200, None), OK, open_to_all=True
    ),
    Row(
        "GET /api/console",
        "no IDs",
        http("GET", "/api/console", query="thread=<thread>"),
        (404, "not_found"),
        (404,),
        open_to_all=True,
        absent=(SECRET,),
    ),
    Row(
        "GET /api/console/{asset}",
        "no IDs",
        http("GET", "/api/console/app.js"),
        (404, "not_found"),
        (404,),
        open_to_all=True,
    ),
    Row("GET /api/health", "no IDs", http("GET", "/api/health"), (200, None), OK, open_to_all=True),
    Row(
        "GET /api/openapi.json",
        "no IDs",
        http("GET", "/api/openapi.json"),
        (200, None),
        OK,
        open_to_all=True,
        absent=(SECRET,),
    ),
    # Signed senders: the origin is what the signature proves (a channel, a repository), never
    # a header; unsigned (the adapters are off here) they are refused for everyone alike.
    Row(
        "POST /api/adapters/github",
        "thread-like body",
        http("POST", "/api/adapters/github", {"thread": "<thread>"}),
        (404, None),
        (404,),
        open_to_all=True,
    ),
    Row(
        "POST /api/adapters/slack/events",
        "thread-like body",
        http("POST", "/api/adapters/slack/events", {"thread": "<thread>"}),
        (404, None),
        (404,),
        open_to_all=True,
    ),
    Row(
        "POST /api/adapters/slack/answer",
        "run of hers",
        http("POST", "/api/adapters/slack/answer", {"run_id": "<run_id>"}),
        (404, None),
        (404,),
        open_to_all=True,
    ),
    # AG-UI: every input that names or touches a thread.
    Row(
        "POST /api/a2a/{workflow}",
        "SendMessage, contextId",
        a2a("SendMessage", a2a_message(contextId="<thread>")),
        STREAM_FORBIDDEN,
        OK,
    ),
    Row(
        "POST /api/a2a/{workflow}",
        "SendMessage, taskId",
        a2a("SendMessage", a2a_message(taskId="<run_id>")),
        STREAM_FORBIDDEN,
        OK,
    ),
    Row(
        "POST /api/a2a/{workflow}",
        "SendStreamingMessage",
        a2a("SendStreamingMessage", a2a_message(contextId="<thread>")),
        STREAM_FORBIDDEN,
        None,
    ),
    Row(
        "POST /api/a2a/{workflow}",
        "SendMessage, taskId of a synchronous task",
        a2a("SendMessage", a2a_message(taskId="<task>")),
        STREAM_FORBIDDEN,
        OK,
    ),
    Row("POST /api/a2a/{workflow}", "GetTask", a2a("GetTask", {"id": "<run_id>"}), STREAM_FORBIDDEN, OK),
    Row(
        "POST /api/a2a/{workflow}",
        "GetTask, a synchronous task",
        a2a("GetTask", {"id": "<task>"}),
        STREAM_FORBIDDEN,
        OK,
        owner_sees=(SECRET,),
    ),
    Row(
        "POST /api/a2a/{workflow}",
        "ListTasks",
        a2a("ListTasks", {"contextId": "alice-a2a", "includeArtifacts": True}),
        STREAM_FORBIDDEN,
        OK,
        owner_sees=(SECRET,),
    ),
    Row("POST /api/a2a/{workflow}", "CancelTask", a2a("CancelTask", {"id": "<run_id>"}), STREAM_FORBIDDEN, None),
    Row(
        "POST /api/a2a/{workflow}",
        "SubscribeToTask",
        a2a("SubscribeToTask", {"id": "<run_id>"}),
        STREAM_FORBIDDEN,
        None,
    ),
    # A2A push configs: the run's callback, read and changed only by its owner.
    Row(
        "POST /api/a2a/{workflow}",
        "CreateTaskPushNotificationConfig",
        a2a("CreateTaskPushNotificationConfig", {"taskId": "<run_id>", "url": "https://hooks.example.com/a2a"}),
        STREAM_FORBIDDEN,
        None,
    ),
    Row(
        "POST /api/a2a/{workflow}",
        "GetTaskPushNotificationConfig",
        a2a("GetTaskPushNotificationConfig", {"taskId": "<run_id>", "id": "<run_id>"}),
        STREAM_FORBIDDEN,
        OK,
    ),
    Row(
        "POST /api/a2a/{workflow}",
        "ListTaskPushNotificationConfigs",
        a2a("ListTaskPushNotificationConfigs", {"taskId": "<run_id>"}),
        STREAM_FORBIDDEN,
        OK,
    ),
    Row(
        "POST /api/a2a/{workflow}",
        "DeleteTaskPushNotificationConfig",
        a2a("DeleteTaskPushNotificationConfig", {"taskId": "<run_id>", "id": "<run_id>"}),
        STREAM_FORBIDDEN,
        OK,
    ),
    Row(
        "GET /api/a2a/{workflow}/.well-known/agent-card.json",
        "the card",
        http("GET", "/api/a2a/default/.well-known/agent-card.json"),
        (200, None),
        OK,
        open_to_all=True,
    ),
    Row("ag-ui:threadId", "reload (no messages)", agui("reload"), STREAM_FORBIDDEN, OK),
    Row("ag-ui:messages", "a turn", agui("messages"), STREAM_FORBIDDEN, OK),
    Row("ag-ui:resume", "an interrupt's answer", agui("resume"), STREAM_FORBIDDEN, OK),
    # MCP tools.
    Row(
        "mcp:run_turn",
        "thread",
        mcp("run_turn", lambda w: {"thread_id": THREAD, "message": "what did I say?"}),
        TOOL_FORBIDDEN,
        OK,
    ),
    Row("mcp:get_thread", "thread", mcp("get_thread", lambda w: {"thread_id": THREAD}), TOOL_FORBIDDEN, OK),
    Row(
        "mcp:start_turn",
        "thread",
        mcp("start_turn", lambda w: {"thread_id": THREAD, "message": "x"}),
        TOOL_FORBIDDEN,
        OK,
    ),
    Row("mcp:get_run", "run", mcp("get_run", lambda w: {"run_id": w.run_id}), TOOL_FORBIDDEN, OK),
]

# AG-UI input fields that name no thread data: they never select what is read.
AGUI_FIELDS_WITHOUT_IDS = {
    "run_id",
    "parent_run_id",
    "protocol_version",
    "state",
    "tools",
    "context",
    "forwarded_props",
}
# AG-UI fields the rows above cover, by the field's name in ``RunAgentInput``.
AGUI_COVERED = {"threadId": "thread_id", "messages": "messages", "resume": "resume"}


# -- the world -------------------------------------------------------------------------------


@pytest.fixture
async def app(two_origins: FunctionHost) -> FunctionHost:
    """The app with Alice and Bob as two origins (tests/adapter/conftest.py)."""
    return two_origins


async def _ok(host: FunctionHost, method: str, path: str, body: Any = None, query: str = "") -> dict[str, Any]:
    answered = await host.request(method, path, json_body=body, headers=ALICE, query=query)
    assert answered.status in (200, 202), (path, await answered.body())
    return dict(await answered.json())


async def alice_world(host: FunctionHost) -> World:
    first = (await _ok(host, "POST", f"/api/threads/{THREAD}/runs", {"messages": SECRET}))["checkpoint_id"]
    head = (await _ok(host, "POST", f"/api/threads/{THREAD}/runs", {"messages": "second"}))["checkpoint_id"]
    cursor = (await _ok(host, "GET", f"/api/threads/{THREAD}/history", query="limit=1"))["next"]
    conversation = (await _ok(host, "POST", "/api/conversations", {}))["id"]
    conv_response = (await _ok(host, "POST", "/api/responses", {"input": SECRET, "conversation": conversation}))["id"]
    item = (await _ok(host, "GET", f"/api/conversations/{conversation}/items"))["data"][0]["id"]
    response = (await _ok(host, "POST", "/api/responses", {"input": SECRET}))["id"]
    run_id = (await _ok(host, "POST", f"/api/threads/{THREAD}/runs", {"messages": "later", "background": True}))[
        "run_id"
    ]
    sent = {"messageId": "alice-m1", "role": "ROLE_USER", "parts": [{"text": SECRET}], "contextId": "alice-a2a"}
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": sent}}
    task = (await _ok(host, "POST", "/api/a2a/default", rpc))["result"]["task"]["id"]
    return World(first, head, cursor, run_id, conversation, item, conv_response, response, task)


async def storage() -> dict[str, str]:
    """Every blob and its ETag: what changed, and what was written."""
    container = wiring.container_for(wiring.load_settings())
    try:
        return {b.name: str(b.etag) async for b in container.list_blobs()}
    except ResourceNotFoundError:
        return {}


# -- the tests -------------------------------------------------------------------------------


def _operations() -> set[str]:
    document = json.loads((ROOT / "functions_adapter" / "openapi.json").read_text())
    methods = {"get", "post", "put", "delete", "patch"}
    return {f"{m.upper()} {path}" for path, item in document["paths"].items() for m in item if m in methods}


def test_the_matrix_covers_every_route_tool_and_input() -> None:
    covered = {row.covers for row in ROWS}
    if any(c.startswith("ag-ui:") for c in covered):  # the AG-UI rows are POST /api/ag-ui's
        covered.add("POST /api/ag-ui")
    operations = _operations()
    assert operations - covered == set(), "operations without a row in the ownership matrix"
    tools = {f"mcp:{name}" for name in TOOLS}
    assert tools - covered == set(), "MCP tools without a row in the ownership matrix"
    fields = set(RunAgentInput.model_fields)
    assert fields - AGUI_FIELDS_WITHOUT_IDS - set(AGUI_COVERED.values()) == set(), "AG-UI input fields not judged"
    assert {f"ag-ui:{name}" for name in AGUI_COVERED} <= covered
    stale = {c for c in covered if not c.startswith(("mcp:", "ag-ui:"))} - operations
    assert stale == set(), "rows for operations the document no longer has"


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
async def test_only_alice_reaches_alice_s_data(app: FunctionHost, row: Row) -> None:
    world = await alice_world(app)
    for caller in (BOB, NOBODY):
        before = await storage()
        answer = await row.call(app, world, caller)
        who = caller.get("x-caller", "anonymous")
        assert (answer.status, answer.code) == row.refusal, (who, answer.text[:500])
        for kept in row.absent:
            assert kept not in answer.text, (who, kept)
        after = await storage()
        if row.open_to_all:  # answered, yet nothing of Alice's changed
            assert {name: after.get(name) for name in before} == before, who
        else:  # refused: nothing read back, nothing written, nothing ran
            assert after == before, (who, set(after) ^ set(before))
    if row.owner is not None:
        answer = await row.call(app, world, ALICE)
        assert answer.status in row.owner, answer.text[:500]
        for mine in row.owner_sees:
            assert mine in answer.text, mine


# -- the raw reads left in the adapter ----------------------------------------------------------

# A read of thread data that takes no caller, by file: each follows an owner check in the same
# function (named here). A new one fails until it is listed, with the check that guards it.
_ARGS = r"\((?:[^()]|\([^()]*\))*\)"  # a call's arguments, one level of nesting
RAW_READ = re.compile(
    rf"pointers\.read\(|store\.(?:load|load_described|get_info)\(|ThreadMetadata{_ARGS}\.(?:get|put)\("
    rf"|records\.get\(|RunRecords{_ARGS}\.get\(|\.get\(run_id\)"
)
GUARDED_READS = {
    # put_metadata: after owned_head.
    "functions_adapter/api/thread_api.py": 1,
    # thread_view: after ownership.owned_head; gate: the authorizer's own input.
    "functions_adapter/thread_access.py": 3,
    # _create: a new ID of its own; _existing/_get/_delete: after owned_head (an update's
    # write and re-read are the library's, threads/metadata_update.py).
    "functions_adapter/openai/conversations_api.py": 4,
    # _state: the checkpoint's own read, after owned_head, refused unless it is the thread's.
    "functions_adapter/api/checkpoint_state.py": 1,
    # logged_run: the record of a response already read through run_access.owned_record.
    "functions_adapter/openai/events.py": 1,
    # _started_there: the Slack answer route compares the record's origin itself.
    "functions_adapter/webhooks/slack_answer.py": 1,
    # _walk, pending_request_ids, read_turn: turns of a task whose first turn passed
    # ownership.checkpoint_info (a TaskTurn is made only by latest_turn, after it), each
    # checked to be of that turn's thread.
    "functions_adapter/a2a/task_turns.py": 3,
}


def test_no_route_reads_thread_data_past_the_owner_check() -> None:
    found = {}
    for path in sorted((ROOT / "functions_adapter").rglob("*.py")):
        count = len(RAW_READ.findall(path.read_text()))
        if count:
            found[str(path.relative_to(ROOT))] = count
    assert found == GUARDED_READS
