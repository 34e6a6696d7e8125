"""Azure Functions entry point: the triggers only, each one line into ``functions_adapter``.

HTTP → parse and authorize (``functions_adapter.api.routes``, ``turns``) → load, resume in one
run, save (``resumable.core``: ``RunService``, ``RunOwner``) → respond (``http_responses``, ``sse``).
Background runs: ``functions_adapter.api.background_api`` / ``queue_triggers`` over
``resumable.background``. MCP tools (the host's ``/runtime/webhooks/mcp``): ``functions_adapter.mcp``.
Thread housekeeping: ``housekeeping`` over ``resumable.threads``.
"""

import gc
import json

import azure.functions as func
from azurefunctions.extensions.http.fastapi import Request, Response

from functions_adapter import callback_formats, request_trace, service_info, telemetry, webhooks
from functions_adapter.a2a import push_format
from functions_adapter.api import routes
from functions_adapter.mcp import contract as mcp

# The queue triggers, the timer and the Responses routes import their modules on first use,
# as the HTTP routes do for background runs: a cold start pays only for the synchronous path.

telemetry.configure()
service_info.check_at_startup()  # a bad WORKFLOW is logged now, not first by a run's 500
app = func.FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)
# A2A push notifications are completion callbacks in A2A's own body: registered here, at the
# entry point, so the queue trigger that delivers one has the format on every instance.
callback_formats.register(push_format.FORMAT, push_format.render)


@app.route(route="runs", methods=["POST"])
async def runs(req: Request) -> Response:
    """Start a run, or resume one from a checkpoint with new input, in one workflow run."""
    return await routes.handle_run(req)


@app.route(route="runs/{run_id}", methods=["GET"])
async def get_run(req: Request) -> Response:
    """A background run's status and, once it finished, its result."""
    return await routes.handle_get_run(req, req.path_params.get("run_id", ""))


@app.route(route="runs/{run_id}/stream", methods=["GET"])
async def join_run(req: Request) -> Response:
    """A background run's events as SSE: replayed from the start, then live."""
    return await routes.handle_join_run(req, req.path_params.get("run_id", ""))


@app.route(route="runs/{run_id}/cancel", methods=["POST"])
async def cancel_run(req: Request) -> Response:
    """Stop a background run: a queued one never starts, a running one commits nothing."""
    return await routes.handle_cancel_run(req, req.path_params.get("run_id", ""))


@app.queue_trigger(arg_name="message", queue_name="%RUNS_QUEUE%", connection="AzureWebJobsStorage")
async def run_in_background(message: func.QueueMessage) -> None:
    """Execute a queued run (the message holds its ID; the request is in its record)."""
    from functions_adapter import queue_triggers  # noqa: PLC0415 - on first use

    await queue_triggers.handle_message(message)


@app.queue_trigger(arg_name="message", queue_name="%RUNS_QUEUE%-poison", connection="AzureWebJobsStorage")
async def fail_poisoned_run(message: func.QueueMessage) -> None:
    """A run whose message used up host.json's maxDequeueCount: mark it failed."""
    from functions_adapter import queue_triggers  # noqa: PLC0415 - on first use

    await queue_triggers.handle_poisoned(message)


@app.route(route="threads", methods=["GET"])
async def list_threads(req: Request) -> Response:
    """The threads the caller may use, a page at a time (``prefix``, ``limit``, ``cursor``)."""
    from functions_adapter.api import thread_list  # noqa: PLC0415 - on first use

    return await thread_list.handle_list(req)


@app.route(route="threads/{thread_id}/runs", methods=["POST"])
async def thread_runs(req: Request) -> Response:
    """A turn on a named conversation: resumes from its head, advances it by compare-and-swap."""
    return await routes.handle_thread_run(req, req.path_params.get("thread_id", ""))


@app.route(route="threads/{thread_id}", methods=["GET"])
async def get_thread(req: Request) -> Response:
    """A thread's head checkpoint and recent lineage."""
    return await routes.handle_get_thread(req, req.path_params.get("thread_id", ""))


@app.route(route="threads/{thread_id}", methods=["DELETE"])
async def delete_thread(req: Request) -> Response:
    """Delete a thread whole (pointer, checkpoints, records); 202 if a repeat must finish it."""
    return await routes.handle_delete_thread(req, req.path_params.get("thread_id", ""))


@app.route(route="threads/{thread_id}/history", methods=["GET"])
async def thread_history(req: Request) -> Response:
    """A thread's lineage, newest first, paginated by an opaque cursor."""
    return await routes.handle_thread_history(req, req.path_params.get("thread_id", ""))


@app.route(route="threads/{thread_id}/metadata", methods=["PUT"])
async def put_thread_metadata(req: Request) -> Response:
    """Replace a thread's metadata (channel or ticket IDs); If-Match makes it conditional."""
    return await routes.handle_put_thread_metadata(req, req.path_params.get("thread_id", ""))


@app.route(route="threads/{thread_id}/checkpoints/{checkpoint_id}/state", methods=["GET"])
async def checkpoint_state(req: Request) -> Response:
    """One thread checkpoint's executor states and shared state, as JSON (the console's debugger)."""
    from functions_adapter.api import checkpoint_state  # noqa: PLC0415 - on first use

    params = req.path_params
    return await checkpoint_state.handle_state(req, params.get("thread_id", ""), params.get("checkpoint_id", ""))


@app.route(route="threads/{thread_id}/checkpoints/{checkpoint_id}/fork", methods=["POST"])
async def fork_edited(req: Request) -> Response:
    """A thread turn forked from a checkpoint with edited executor states."""
    from functions_adapter.api import checkpoint_state  # noqa: PLC0415 - on first use

    params = req.path_params
    return await checkpoint_state.handle_fork(req, params.get("thread_id", ""), params.get("checkpoint_id", ""))


@app.route(route="checkpoints/{checkpoint_id}", methods=["GET"])
async def get_checkpoint(req: Request) -> Response:
    """A checkpoint's metadata and lineage (never its state)."""
    return await routes.handle_get_checkpoint(req, req.path_params.get("checkpoint_id", ""))


@app.route(route="responses", methods=["POST"])
async def responses(req: Request) -> Response:
    """OpenAI Responses API: a turn (new, continued, or on a conversation), as a response."""
    from functions_adapter.openai import responses_api  # noqa: PLC0415 - on first use

    return await responses_api.handle_create(req)


@app.route(route="responses/{response_id}", methods=["GET"])
async def get_response(req: Request) -> Response:
    """A stored response; with ``?stream=true``, its events (``starting_after=N``), then live."""
    from functions_adapter.openai import responses_api  # noqa: PLC0415 - on first use

    return await responses_api.handle_get(req, req.path_params.get("response_id", ""))


@app.route(route="responses/{response_id}", methods=["DELETE"])
async def delete_response(req: Request) -> Response:
    """Delete a finished response (its record); the checkpoint it saved stays."""
    from functions_adapter.openai import responses_api  # noqa: PLC0415 - on first use

    return await responses_api.handle_delete(req, req.path_params.get("response_id", ""))


@app.route(route="responses/{response_id}/cancel", methods=["POST"])
async def cancel_response(req: Request) -> Response:
    """Cancel a background response: a queued one never starts, a running one commits nothing."""
    from functions_adapter.openai import responses_api  # noqa: PLC0415 - on first use

    return await responses_api.handle_cancel(req, req.path_params.get("response_id", ""))


@app.route(route="responses/{response_id}/input_items", methods=["GET"])
async def response_input_items(req: Request) -> Response:
    """The input a response was created with, a page at a time."""
    from functions_adapter.openai import responses_api  # noqa: PLC0415 - on first use

    return await responses_api.handle_input_items(req, req.path_params.get("response_id", ""))


@app.route(route="ag-ui", methods=["POST"])
async def ag_ui(req: Request) -> Response:
    """AG-UI: a RunAgentInput on a thread (threadId), answered as an AG-UI event stream."""
    from functions_adapter import ag_ui  # noqa: PLC0415 - on first use

    return await ag_ui.handle_run(req)


@app.route(route="a2a/{workflow}/.well-known/agent-card.json", methods=["GET"])
async def a2a_card(req: Request) -> Response:
    """A2A: the workflow's agent card (the SDK's card resolver finds it under /api/a2a/{workflow})."""
    from functions_adapter.a2a import card_route  # noqa: PLC0415 - on first use

    return await card_route.handle_card(req, req.path_params.get("workflow", ""))


@app.route(route="a2a/{workflow}", methods=["POST"])
async def a2a_rpc(req: Request) -> Response:
    """A2A JSON-RPC: SendMessage, SendStreamingMessage, GetTask, CancelTask, SubscribeToTask, push configs."""
    from functions_adapter.a2a import route as a2a  # noqa: PLC0415 - on first use

    return await a2a.handle_rpc(req, req.path_params.get("workflow", ""))


@app.route(route="conversations", methods=["POST"])
async def create_conversation(req: Request) -> Response:
    """OpenAI Conversations API: a new thread with a generated ID (and optional metadata)."""
    from functions_adapter.openai import conversations_api  # noqa: PLC0415 - on first use

    return await conversations_api.handle_create(req)


@app.route(route="conversations/{conversation_id}", methods=["GET"])
async def get_conversation(req: Request) -> Response:
    """A conversation (a thread): its ID, creation time and metadata."""
    from functions_adapter.openai import conversations_api  # noqa: PLC0415 - on first use

    return await conversations_api.handle_get(req, req.path_params.get("conversation_id", ""))


@app.route(route="conversations/{conversation_id}", methods=["POST"])
async def update_conversation(req: Request) -> Response:
    """Replace a conversation's metadata."""
    from functions_adapter.openai import conversations_api  # noqa: PLC0415 - on first use

    return await conversations_api.handle_update(req, req.path_params.get("conversation_id", ""))


@app.route(route="conversations/{conversation_id}", methods=["DELETE"])
async def delete_conversation(req: Request) -> Response:
    """Delete a conversation: its thread, whole, as DELETE /api/threads/{id} does."""
    from functions_adapter.openai import conversations_api  # noqa: PLC0415 - on first use

    return await conversations_api.handle_delete(req, req.path_params.get("conversation_id", ""))


@app.route(route="conversations/{conversation_id}/items", methods=["GET"])
async def conversation_items(req: Request) -> Response:
    """A conversation's messages, read back from its turns' checkpoints, a page at a time."""
    from functions_adapter.openai import conversations_api  # noqa: PLC0415 - on first use

    return await conversations_api.handle_items(req, req.path_params.get("conversation_id", ""))


def _mcp_tool(tool: mcp.Tool) -> dict[str, object]:
    """The tool trigger's binding fields: the contract's schemas, and our own result envelope."""
    return {
        "arg_name": "context",
        "tool_name": tool.name,
        "description": tool.description,
        "tool_properties": tool.tool_properties_json(),
        "output_schema": json.dumps(tool.output_schema),
        "use_result_schema": True,
    }


@app.mcp_tool_trigger(**_mcp_tool(mcp.TOOLS[mcp.RUN_TURN]))  # type: ignore[arg-type]
async def mcp_run_turn(context: str) -> str:
    """MCP ``run_turn``: one turn on a thread, as ``POST /api/threads/{id}/runs`` runs it."""
    from functions_adapter.mcp import trigger  # noqa: PLC0415 - on first use

    return await trigger.handle(mcp.RUN_TURN, context)


@app.mcp_tool_trigger(**_mcp_tool(mcp.TOOLS[mcp.GET_THREAD]))  # type: ignore[arg-type]
async def mcp_get_thread(context: str) -> str:
    """MCP ``get_thread``: the thread's head and recent lineage, as ``GET /api/threads/{id}``."""
    from functions_adapter.mcp import trigger  # noqa: PLC0415 - on first use

    return await trigger.handle(mcp.GET_THREAD, context)


@app.mcp_tool_trigger(**_mcp_tool(mcp.TOOLS[mcp.START_TURN]))  # type: ignore[arg-type]
async def mcp_start_turn(context: str) -> str:
    """MCP ``start_turn``: the turn as a background run (``"background": true`` on the thread route)."""
    from functions_adapter.mcp import trigger  # noqa: PLC0415 - on first use

    return await trigger.handle(mcp.START_TURN, context)


@app.mcp_tool_trigger(**_mcp_tool(mcp.TOOLS[mcp.GET_RUN]))  # type: ignore[arg-type]
async def mcp_get_run(context: str) -> str:
    """MCP ``get_run``: a background run's status and result, as ``GET /api/runs/{id}``."""
    from functions_adapter.mcp import trigger  # noqa: PLC0415 - on first use

    return await trigger.handle(mcp.GET_RUN, context)


@app.timer_trigger(schedule="0 17 * * * *", arg_name="timer", run_on_startup=False)
async def sweep_orphan_checkpoints(timer: func.TimerRequest) -> None:
    """Hourly at :17, a budgeted slice of the daily pass: delete thread checkpoints no thread
    reaches (lost races), keep each thread's recent lineage from ageing out."""
    from functions_adapter import housekeeping  # noqa: PLC0415 - on first use

    await housekeeping.run()


@app.route(route="console", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
async def console_page(req: Request) -> Response:
    """The web console's page (only with CONSOLE_ENABLED); anonymous: it holds no data."""
    from functions_adapter.console import pages  # noqa: PLC0415 - on first use

    return await pages.handle_page(req)


@app.route(route="console/{asset}", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
async def console_asset(req: Request) -> Response:
    """One of the console's own files (its modules, stylesheet, icon)."""
    from functions_adapter.console import pages  # noqa: PLC0415 - on first use

    return await pages.handle_asset(req, req.path_params.get("asset", ""))


@app.route(route="workflows", methods=["GET"])
async def list_workflows(req: Request) -> Response:
    """Each hosted workflow, its versions and policy, and the live threads on each version."""
    from functions_adapter.api import workflows_api  # noqa: PLC0415 - on first use

    return await workflows_api.handle_workflows(req)


@app.route(route="workflows/{name}", methods=["GET"])
async def get_workflow(req: Request) -> Response:
    """One workflow: each version's graph (executors and edges) and graph signature."""
    from functions_adapter.api import workflows_api  # noqa: PLC0415 - on first use

    return await workflows_api.handle_workflow(req, req.path_params.get("name", ""))


@app.route(route="health", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
async def health(req: Request) -> Response:
    """Liveness probe; anonymous, touches no storage; names a setting that keeps runs from working."""
    return await request_trace.untraced(service_info.handle_health)


@app.route(route="openapi.json", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
async def openapi(req: Request) -> Response:
    """The OpenAPI 3.1 document of every route; anonymous."""
    return await service_info.handle_openapi(req)


# The Slack and GitHub adapters (/api/adapters/...), each only when its signing secret is set;
# read when the host indexes the app, so turning one on or off takes a restart.
webhooks.register(app)

# Everything imported so far lives for the whole worker. Moving it out of the collector's
# view keeps full collections short under load: in bench/run.py, 50 concurrent resumes saw
# generation-2 pauses of up to ~47 ms without this and ~11 ms with it.
gc.freeze()
