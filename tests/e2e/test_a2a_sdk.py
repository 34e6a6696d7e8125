"""The A2A SDK's own client (``a2a-sdk`` 1.3, unmodified) against ``scripts/serve.sh``.

``create_client`` resolves the agent card from ``/api/a2a/default`` (its default relative path,
``.well-known/agent-card.json``), picks the card's JSON-RPC interface and sends A2A v1.0 calls
with the function key in ``x-functions-key``: two messages on one context (the second reply
is the thread's turn 2, and ListTasks lists both, newest first), a streamed message, GetTask
reading back the task a blocking send answered, a retried message that runs nothing twice, an
approval as input-required answered on the same task (a wrong answer refused first, nothing
run), a non-blocking send followed by SubscribeToTask and GetTask, a cancel, a deleted
thread's task gone, another origin's task and context refused, a malformed message, and the
errors a client maps to its own exception types; and Agent Framework's ``A2AAgent`` with the
workflow as its remote agent.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, create_client
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError, TaskNotCancelableError, TaskNotFoundError, UnsupportedOperationError
from agent_framework_a2a import A2AAgent
from google.protobuf import json_format, struct_pb2

from tests.serving import ROOT, Serving, serving


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serving]:
    with serving(tmp_path_factory.mktemp("a2a-sdk")) as server:
        yield server


async def _client(
    served: Serving, *, streaming: bool, workflow: str = "default", caller: str | None = None
) -> AsyncIterator[Client]:
    headers = {"x-functions-key": "local", **({} if caller is None else {"x-caller": caller})}
    http = httpx.AsyncClient(headers=headers, timeout=120)
    client = await create_client(f"{served.base}/a2a/{workflow}", ClientConfig(streaming=streaming, httpx_client=http))
    try:
        yield client
    finally:
        await http.aclose()


@pytest.fixture
async def blocking(served: Serving) -> AsyncIterator[Client]:
    async for client in _client(served, streaming=False):
        yield client


@pytest.fixture
async def streaming(served: Serving) -> AsyncIterator[Client]:
    async for client in _client(served, streaming=True):
        yield client


def _request(text: str, context_id: str = "") -> SendMessageRequest:
    message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)], context_id=context_id)
    return SendMessageRequest(message=message)


async def _events(client: Client, request: SendMessageRequest) -> list[StreamResponse]:
    return [event async for event in client.send_message(request)]


async def test_two_messages_on_one_context_are_turns_1_and_2(blocking: Client) -> None:
    (first,) = await _events(blocking, _request("My name is Ada."))
    assert first.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert first.task.artifacts[0].parts[0].text.startswith('turn 1: you said "My name is Ada."')
    (second,) = await _events(blocking, _request("What is my name?", first.task.context_id))
    assert second.task.context_id == first.task.context_id
    assert second.task.artifacts[0].parts[0].text.startswith('turn 2: you said "What is my name?"')
    got = await blocking.get_task(GetTaskRequest(id=second.task.id))
    assert got.status.state == TaskState.TASK_STATE_COMPLETED
    listed = await blocking.list_tasks(ListTasksRequest(context_id=first.task.context_id))
    assert [task.id for task in listed.tasks] == [second.task.id, first.task.id]  # newest first
    assert listed.next_page_token == ""


async def test_a_streamed_message_ends_with_the_reply_and_completed(streaming: Client) -> None:
    events = await _events(streaming, _request("stream me"))
    assert events[0].HasField("task")
    (artifact,) = [e.artifact_update.artifact for e in events if e.HasField("artifact_update")]
    assert artifact.parts[0].text.startswith('turn 1: you said "stream me"')
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED


async def test_an_unknown_task_is_the_sdks_task_not_found(blocking: Client) -> None:
    with pytest.raises(TaskNotFoundError):
        await blocking.get_task(GetTaskRequest(id=str(uuid.uuid4())))


async def _turns(served: Serving, context_id: str) -> int:
    async with httpx.AsyncClient(headers={"x-functions-key": "local"}) as http:
        answered = await http.get(f"{served.base}/threads/{context_id}")
    assert answered.status_code == 200, answered.text
    return int(answered.json()["turns"])


def _answer(task_id: str, responses: dict[str, str]) -> SendMessageRequest:
    data = json_format.ParseDict({"responses": responses}, struct_pb2.Value())
    message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(data=data)], task_id=task_id)
    return SendMessageRequest(message=message)


async def test_a_blocking_send_is_read_back_by_get_task_and_a_retry_runs_nothing(
    blocking: Client, served: Serving
) -> None:
    request = _request("Remember this once.")
    (sent,) = await _events(blocking, request)
    got = await blocking.get_task(GetTaskRequest(id=sent.task.id))
    assert got.id == sent.task.id and got.status.state == TaskState.TASK_STATE_COMPLETED
    assert got.artifacts == sent.task.artifacts
    (again,) = await _events(blocking, request)  # the same messageId: the first answer, replayed
    assert again.task.id == sent.task.id and again.task.artifacts == sent.task.artifacts
    assert await _turns(served, sent.task.context_id) == 1


async def test_an_approval_is_answered_on_the_same_task(blocking: Client, served: Serving) -> None:
    (asked,) = await _events(blocking, _request("I need approval for this."))
    assert asked.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    pending = json_format.MessageToDict(asked.task.status.message.parts[1].data)["pending_requests"]
    (request_id,) = [p["request_id"] for p in pending]
    with pytest.raises(InvalidParamsError, match="not pending"):  # a wrong answer: refused before it runs
        await _events(blocking, _answer(asked.task.id, {"no-such-request": "yes"}))
    assert await _turns(served, asked.task.context_id) == 1
    (done,) = await _events(blocking, _answer(asked.task.id, {request_id: "yes"}))
    assert done.task.id == asked.task.id
    assert done.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert 'Approval answer: "yes"' in done.task.artifacts[0].parts[0].text
    assert (await blocking.get_task(GetTaskRequest(id=asked.task.id))).status.state == TaskState.TASK_STATE_COMPLETED
    with pytest.raises(UnsupportedOperationError):  # a completed task takes no more answers
        await _events(blocking, _answer(asked.task.id, {request_id: "again"}))
    assert await _turns(served, asked.task.context_id) == 2


async def test_a_deleted_threads_task_is_not_found(blocking: Client, served: Serving) -> None:
    (sent,) = await _events(blocking, _request("Forget me."))
    async with httpx.AsyncClient(headers={"x-functions-key": "local"}) as http:
        deleted = await http.delete(f"{served.base}/threads/{sent.task.context_id}")
    assert deleted.status_code in (200, 202, 204), deleted.text
    with pytest.raises(TaskNotFoundError):
        await blocking.get_task(GetTaskRequest(id=sent.task.id))


async def test_agent_frameworks_a2a_agent_keeps_one_context_across_runs(served: Serving) -> None:
    """Agent Framework's own client agent (``agent-framework-a2a``'s ``A2AAgent``) with the
    workflow as its remote agent: two runs on one session are turns 1 and 2 of one thread."""
    async with httpx.AsyncClient(headers={"x-functions-key": "local"}, timeout=120) as http:
        card = await A2ACardResolver(http, f"{served.base}/a2a/default").get_agent_card()
        agent = A2AAgent(agent_card=card, http_client=http)
        session = agent.create_session()
        first = await agent.run("My name is Ada.", session=session)
        second = await agent.run("What is my name?", session=session)
    assert first.text.startswith('turn 1: you said "My name is Ada."')
    assert second.text.startswith('turn 2: you said "What is my name?"')
    assert 'Earlier you said: "My name is Ada."' in second.text


def _slow_request(text: str) -> SendMessageRequest:
    """A ``step-pipeline`` message that takes about 3 s (each of its ten steps pauses), queued."""
    message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=f"{text} slowly")])
    return SendMessageRequest(message=message, configuration=SendMessageConfiguration(return_immediately=True))


@pytest.fixture
async def queued(served: Serving) -> AsyncIterator[Client]:
    async for client in _client(served, streaming=False, workflow="step-pipeline"):
        yield client


@pytest.fixture
async def subscriber(served: Serving) -> AsyncIterator[Client]:
    async for client in _client(served, streaming=True, workflow="step-pipeline"):
        yield client


async def test_a_non_blocking_send_is_followed_by_subscribe_and_get_task(queued: Client, subscriber: Client) -> None:
    (accepted,) = await _events(queued, _slow_request("follow me"))
    assert accepted.task.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
    followed = [event async for event in subscriber.subscribe(SubscribeToTaskRequest(id=accepted.task.id))]
    assert followed[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    (artifact,) = [e.artifact_update.artifact for e in followed if e.HasField("artifact_update")]
    got = await queued.get_task(GetTaskRequest(id=accepted.task.id))
    assert got.status.state == TaskState.TASK_STATE_COMPLETED and list(got.artifacts) == [artifact]
    assert "follow me slowly" in artifact.parts[0].text


async def test_a_running_task_is_cancelled_and_a_completed_one_is_not_cancelable(
    queued: Client, blocking: Client
) -> None:
    (accepted,) = await _events(queued, _slow_request("stop me"))
    cancelled = await queued.cancel_task(CancelTaskRequest(id=accepted.task.id))
    while cancelled.status.state not in (TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_COMPLETED):
        await asyncio.sleep(0.2)  # a running run stops at its next step
        cancelled = await queued.get_task(GetTaskRequest(id=accepted.task.id))
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    assert not cancelled.artifacts  # it never answered
    (done,) = await _events(blocking, _request("done already"))
    with pytest.raises(TaskNotCancelableError):
        await blocking.cancel_task(CancelTaskRequest(id=done.task.id))


async def test_a_malformed_message_is_the_sdks_invalid_params(blocking: Client) -> None:
    empty = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER)  # no parts
    with pytest.raises(InvalidParamsError, match="parts"):
        await _events(blocking, SendMessageRequest(message=empty))


@pytest.fixture(scope="module")
def served_principals(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serving]:
    """The app with a principal header (``x-caller``) naming each caller's origin."""
    tmp = tmp_path_factory.mktemp("a2a-principals")
    settings = json.loads((ROOT / "local.settings.sample.json").read_text())
    settings["Values"]["THREAD_PRINCIPAL_HEADER"] = "x-caller"
    (tmp / "local.settings.json").write_text(json.dumps(settings))
    with serving(tmp, settings=tmp / "local.settings.json") as server:
        yield server


async def test_another_origins_task_and_context_are_refused(served_principals: Serving) -> None:
    async for alice in _client(served_principals, streaming=False, caller="alice"):
        (sent,) = await _events(alice, _request("Alice's secret"))
        async for bob in _client(served_principals, streaming=False, caller="bob"):
            with pytest.raises(InvalidParamsError, match=r"may not|another origin"):
                await bob.get_task(GetTaskRequest(id=sent.task.id))
            with pytest.raises(InvalidParamsError, match=r"may not|another origin"):
                await _events(bob, _request("let me in", sent.task.context_id))
            with pytest.raises(InvalidParamsError, match=r"may not|another origin"):
                await bob.list_tasks(ListTasksRequest(context_id=sent.task.context_id))
        got = await alice.get_task(GetTaskRequest(id=sent.task.id))
        assert got.status.state == TaskState.TASK_STATE_COMPLETED
        assert got.artifacts[0].parts[0].text.startswith('turn 1: you said "Alice\'s secret"')


def test_the_docs_program_runs_as_written(served: Serving, capsys: pytest.CaptureFixture[str]) -> None:
    """docs/a2a.md's first program, only its address changed to this server's."""
    page = (ROOT / "docs" / "a2a.md").read_text()
    program = page.split("```python\n", 1)[1].split("```", 1)[0]
    exec(program.replace("http://127.0.0.1:7071/api", served.base), {"__name__": "__main__"})  # a complete program
    first, second = capsys.readouterr().out.splitlines()
    assert first.startswith('turn 1: you said "My name is Ada."')
    assert second == 'turn 2: you said "What is my name?". Earlier you said: "My name is Ada."'
