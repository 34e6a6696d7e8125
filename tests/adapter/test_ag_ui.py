"""POST /api/ag-ui in-process: AG-UI input → one thread turn, events out, costs as the runs route."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest

from devtools.function_host import FunctionHost
from devtools.instances import Instance, separate_instances
from devtools.op_counter import OperationCounter


def agui_body(thread_id: str, messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """What @ag-ui/client 1.0's HttpAgent sends: every field, the whole conversation."""
    return {
        "threadId": thread_id,
        "runId": str(uuid.uuid4()),
        "protocolVersion": "1.0",
        "tools": [],
        "context": [],
        "forwardedProps": {},
        "state": {},
        "messages": messages,
        **extra,
    }


def user(text: str) -> dict[str, str]:
    return {"id": str(uuid.uuid4()), "role": "user", "content": text}


async def agui(host: FunctionHost, body: Any, **headers: str) -> tuple[int, list[dict[str, Any]]]:
    raw = json.dumps(body).encode() if not isinstance(body, bytes) else body
    sent = {"content-type": "application/json", "accept": "text/event-stream", **headers}
    response = await host.request("POST", "/api/ag-ui", body=raw, headers=sent)
    text = (await response.body()).decode()
    if response.status != 200:
        return response.status, [json.loads(text)]
    frames = [f for f in text.split("\n\n") if f.startswith("data: ")]
    return 200, [json.loads(f[len("data: ") :]) for f in frames]


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def replies(events: list[dict[str, Any]]) -> dict[str, str]:
    texts: dict[str, str] = {}
    for e in events:
        if e["type"] == "TEXT_MESSAGE_START":
            texts[e["messageId"]] = ""
        elif e["type"] == "TEXT_MESSAGE_CONTENT":
            texts[e["messageId"]] += e["delta"]
    return texts


async def test_two_runs_then_a_reload_snapshot(host: FunctionHost) -> None:
    first_message = user("hello")
    status, events = await agui(host, agui_body("ag-1", [first_message]))
    assert status == 200
    assert types(events) == [
        "RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "RUN_FINISHED"
    ]  # fmt: skip
    assert events[0]["threadId"] == "ag-1" and "outcome" not in events[-1]
    ((reply_id, reply),) = replies(events).items()
    assert reply.startswith("turn 1")

    # The client echoes the conversation back, the reply under the ID the server gave it.
    conversation = [first_message, {"id": reply_id, "role": "assistant", "content": reply}, user("again")]
    status, events = await agui(host, agui_body("ag-1", conversation))
    ((second_id, second),) = replies(events).items()
    assert second.startswith('turn 2: you said "again"') and '"hello"' in second

    # A fresh frontend on the same thread: no messages → the history, nothing run.
    status, events = await agui(host, agui_body("ag-1", []))
    assert types(events) == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    snapshot = events[1]["messages"]
    expected = [first_message["id"], reply_id, conversation[2]["id"], second_id]
    assert [m["id"] for m in snapshot] == expected
    assert [m["role"] for m in snapshot] == ["user", "assistant", "user", "assistant"]
    assert snapshot[3]["content"] == second
    # Resending the whole conversation with nothing new runs nothing either.
    status, events = await agui(host, agui_body("ag-1", [*conversation, {**snapshot[3]}]))
    assert types(events) == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    head = await (await host.request("GET", "/api/threads/ag-1")).json()
    assert head["turns"] == 2


async def test_an_approval_is_an_interrupt_and_resume_answers_it(host: FunctionHost) -> None:
    ask = user("needs approval please")
    _, events = await agui(host, agui_body("ag-2", [ask]))
    assert types(events) == ["RUN_STARTED", "RUN_FINISHED"]
    outcome = events[-1]["outcome"]
    assert outcome["type"] == "interrupt"
    (interrupt,) = outcome["interrupts"]
    assert interrupt["reason"] == "request_info" and interrupt["id"]

    # A reload while it waits shows the interrupt again.
    _, reload = await agui(host, agui_body("ag-2", [ask]))
    assert types(reload) == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    assert reload[-1]["outcome"]["interrupts"][0]["id"] == interrupt["id"]

    resume = [{"interruptId": interrupt["id"], "status": "resolved", "payload": "yes"}]
    _, events = await agui(host, agui_body("ag-2", [ask], resume=resume))
    ((_, reply),) = replies(events).items()
    assert 'Approval answer: "yes"' in reply and "outcome" not in events[-1]


async def test_cancelled_leaves_the_request_pending(host: FunctionHost) -> None:
    ask = user("approval needed")
    _, events = await agui(host, agui_body("ag-3", [ask]))
    interrupt_id = events[-1]["outcome"]["interrupts"][0]["id"]
    resume = [{"interruptId": interrupt_id, "status": "cancelled"}]
    _, events = await agui(host, agui_body("ag-3", [ask], resume=resume))
    assert types(events) == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    assert events[-1]["outcome"]["interrupts"][0]["id"] == interrupt_id
    # A new message while it waits is refused as on the runs route.
    _, events = await agui(host, agui_body("ag-3", [ask, user("something else")]))
    assert types(events) == ["RUN_STARTED", "RUN_ERROR"]
    assert events[-1]["code"] == "pending_requests"


async def test_refused_runs_are_run_error_after_run_started(host: FunctionHost) -> None:
    _, events = await agui(host, agui_body("bad..id", [user("hi")]))
    assert types(events) == ["RUN_STARTED", "RUN_ERROR"] and events[-1]["code"] == "invalid_request"
    _, events = await agui(host, agui_body("ag-4", [user("x" * 40_000)]))
    assert types(events) == ["RUN_STARTED", "RUN_ERROR"] and events[-1]["code"] == "invalid_request"


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[]",
        b'{"threadId": "t"}',
        b'{"threadId": 5, "runId": "r", "messages": []}',
        b'{"threadId": "t", "runId": "r", "messages": [{"role": "user"}]}',
        b'{"threadId": "t", "runId": "r", "messages": "hi"}',
        b'{"threadId": "", "runId": "r", "messages": []}',
        b'{"threadId": "t", "runId": "r", "messages": [], "resume": [{"interruptId": "i", "status": "maybe"}]}',
        b'{"threadId": "t", "runId": "r", "messages": [{"id": "m", "role": "user", "content": [{"type": "image"}]}]}',
        b'{"threadId": "t", "runId": "r", "messages": [], "x": NaN}',
        json.dumps(agui_body("t" * 300, [])).encode(),
        json.dumps(agui_body("t", [{"id": "m" * 300, "role": "user", "content": "hi"}])).encode(),
        json.dumps(agui_body("t", [user("hi")] * 1001)).encode(),
    ],
)
async def test_hostile_bodies_are_400_before_any_event(host: FunctionHost, body: bytes) -> None:
    status, (error,) = await agui(host, body)
    assert status == 400 and error["error"]["code"] == "invalid_request"


async def test_a_turn_costs_what_the_runs_route_costs(host: FunctionHost, ops: OperationCounter) -> None:
    first = await host.request("POST", "/api/threads/cost-runs/runs", json_body={"messages": "hello"})
    assert first.status == 200
    ops.reset()
    response = await host.request(
        "POST", "/api/threads/cost-runs/runs", json_body={"messages": "again", "stream": True}
    )
    await response.body()
    runs_route = dict(ops.counts)

    opening = user("hello")
    _, events = await agui(host, agui_body("cost-agui", [opening]))
    ((reply_id, reply),) = replies(events).items()
    ops.reset()
    conversation = [opening, {"id": reply_id, "role": "assistant", "content": reply}, user("again")]
    _, events = await agui(host, agui_body("cost-agui", conversation))
    assert types(events)[-1] == "RUN_FINISHED"
    assert dict(ops.counts) == runs_route

    ops.reset()
    _, events = await agui(host, agui_body("cost-agui", []))
    assert types(events) == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    assert set(ops.counts) <= {"GET", "HEAD"} and ops.total > 0


async def test_a_reload_reads_the_pointer_once_and_each_turn_s_checkpoint_once(
    host: FunctionHost, ops: OperationCounter
) -> None:
    """N + 1 reads for an N-turn thread: the pointer the owner check read is the one the
    transcript walks from, and the head checkpoint the walk read is the one whose pending
    requests the snapshot reports (each was read twice: N + 3)."""
    conversation: list[dict[str, Any]] = []
    for text in ("one", "two", "three"):
        conversation.append(user(text))
        _, events = await agui(host, agui_body("ag-reload-cost", conversation))
        ((reply_id, reply),) = replies(events).items()
        conversation.append({"id": reply_id, "role": "assistant", "content": reply})
    ops.reset()
    _, events = await agui(host, agui_body("ag-reload-cost", []))
    assert types(events) == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    assert [m["id"] for m in events[1]["messages"]] == [m["id"] for m in conversation]
    read = [url.rsplit("/", 2)[-2:] for _, url in ops.log]
    assert set(ops.counts) == {"GET"} and len(read) == 3 + 1, ops.log
    assert [folder for folder, _ in read].count("threads") == 1, ops.log
    checkpoints = [name for folder, name in read if folder == "checkpoints"]
    assert len(checkpoints) == len(set(checkpoints)) == 3, ops.log


async def test_the_authorizer_refuses_runs_and_reloads(host: FunctionHost, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THREAD_AUTHORIZER", "functions_adapter.authorizers:thread_prefix_of_principal")
    monkeypatch.setenv("THREAD_PRINCIPAL_HEADER", "x-caller")
    _, events = await agui(host, agui_body("alice.1", [user("mine")]), **{"x-caller": "alice"})
    assert types(events)[-1] == "RUN_FINISHED"
    for messages in ([user("theirs")], []):  # a run, and a reload that would show the history
        _, events = await agui(host, agui_body("alice.1", messages), **{"x-caller": "bob"})
        assert types(events) == ["RUN_STARTED", "RUN_ERROR"] and events[-1]["code"] == "forbidden"
    head = await (await host.request("GET", "/api/threads/alice.1", headers={"x-caller": "alice"})).json()
    assert head["turns"] == 1


async def test_a_busy_thread_is_run_error_thread_busy(host: FunctionHost) -> None:
    sent = [agui_body("ag-busy", [user(f"m{i}")]) for i in range(3)]
    headers = {"content-type": "application/json"}
    responses = await asyncio.gather(
        *(host.request("POST", "/api/ag-ui", body=json.dumps(b).encode(), headers=headers) for b in sent)
    )
    ends = []
    for response in responses:
        frames = (await response.body()).decode().split("\n\n")
        ends.append(json.loads([f for f in frames if f.startswith("data: ")][-1][6:]))
    refused = [e for e in ends if e["type"] == "RUN_ERROR"]
    assert refused and {e.get("code") for e in refused} == {"thread_busy"}
    assert all(e["metadata"] == {"retryAfterSeconds": 1} for e in refused)
    head = await (await host.request("GET", "/api/threads/ag-busy")).json()
    assert head["turns"] == len(ends) - len(refused)


async def test_the_other_routes_attacks_on_length_type_and_json(host: FunctionHost) -> None:
    """As test_hostile_input does for the other POST routes: 413/400/415, never a stream or 500."""
    body = json.dumps(agui_body("t1", [user("hi")])).encode()
    for value, status in [("9" * 5000, 413), ("-1", 400), ("1.5", 400), ("[1]", 400), ("\u00b2", 400)]:
        headers = {"content-type": "application/json", "content-length": value}
        answer = await host.request("POST", "/api/ag-ui", body=body, headers=headers)
        assert answer.status == status, (value, await answer.body())
    for content_type in ("text/plain", "application/x-www-form-urlencoded"):
        answer = await host.request("POST", "/api/ag-ui", body=body, headers={"content-type": content_type})
        assert answer.status == 415
    for raw, said in [
        (b"", "The body is empty"),
        (b'{"threadId": "t",\n "runId": tru}', "line 2, column 11"),
        (b"\xff{}", "not UTF-8: byte 0xff at offset 0"),
    ]:
        status, (error,) = await agui(host, raw)
        assert status == 400 and said in error["error"]["message"], error


async def test_a_retried_run_runs_nothing_twice(host: FunctionHost) -> None:
    """A client that lost the answer sends the same run again: the thread's last turn recorded
    its message's ID, so the retry answers the history, with the reply, and runs nothing."""
    body = agui_body("ag-retry", [user("hello")])
    _, first = await agui(host, body)
    ((reply_id, reply),) = replies(first).items()
    _, again = await agui(host, body)
    assert types(again) == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    assert [(m["id"], m.get("content")) for m in again[1]["messages"]][-1] == (reply_id, reply)
    assert (await (await host.request("GET", "/api/threads/ag-retry")).json())["turns"] == 1


async def test_nothing_of_a_deleted_thread_comes_back(host: FunctionHost) -> None:
    opening = user("remember me")
    await agui(host, agui_body("ag-gone", [opening]))
    assert (await host.request("DELETE", "/api/threads/ag-gone")).status == 204
    _, reload = await agui(host, agui_body("ag-gone", []))
    assert types(reload) == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"] and reload[1]["messages"] == []
    # The frontend still holds the old conversation: its message is applied to a new thread.
    _, events = await agui(host, agui_body("ag-gone", [opening]))
    ((_, reply),) = replies(events).items()
    assert reply.startswith('turn 1: you said "remember me". Earlier you said: nothing yet')


async def test_a_thread_of_another_origin_is_refused_runs_and_reloads(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No authorizer: the thread's recorded origin (the principal that made it) decides."""
    monkeypatch.setenv("THREAD_PRINCIPAL_HEADER", "x-caller")
    _, events = await agui(host, agui_body("ag-origin", [user("mine")]), **{"x-caller": "alice"})
    assert types(events)[-1] == "RUN_FINISHED"
    for messages in ([user("theirs")], []):
        _, events = await agui(host, agui_body("ag-origin", messages), **{"x-caller": "mallory"})
        assert types(events) == ["RUN_STARTED", "RUN_ERROR"] and events[-1]["code"] == "forbidden"
    _, events = await agui(host, agui_body("ag-origin", []), **{"x-caller": "alice"})
    assert events[1]["messages"][0]["content"] == "mine"


async def test_one_run_retried_on_a_second_instance_at_once_commits_once(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A frontend's retry that reaches another instance while the first attempt runs: storage
    decides (the pointer's compare-and-swap); one commits, the other ends in ``thread_busy`` or,
    if it starts after the commit, answers the history. Never two turns."""
    with separate_instances(monkeypatch):
        a, b = Instance(), Instance()
        for round_ in range(3):
            thread = f"ag-race-{round_}"
            opening = user("seed")
            _, events = await agui(host, agui_body(thread, [opening]))
            ((reply_id, reply),) = replies(events).items()
            body = agui_body(thread, [opening, {"id": reply_id, "role": "assistant", "content": reply}, user("x")])

            async def on(instance: Instance, body: dict[str, Any] = body) -> list[dict[str, Any]]:
                with instance.active():
                    return (await agui(host, body))[1]

            answers = await asyncio.gather(on(a), on(b))
            ends = [(e[-1]["type"], e[-1].get("code")) for e in answers]
            assert all(end in {("RUN_FINISHED", None), ("RUN_ERROR", "thread_busy")} for end in ends), ends
            assert ("RUN_FINISHED", None) in ends
            assert (await (await host.request("GET", f"/api/threads/{thread}")).json())["turns"] == 2


async def test_a_turn_on_an_instance_whose_cached_head_is_stale_builds_on_the_real_head(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Instance A ran turn 1, B turn 2: A's cached pointer is stale when turn 3 reaches it. A
    streamed turn reads the pointer before its first event, so turn 3 builds on turn 2 and
    commits. On A's cached head its swap would fail only after its reply was sent, and it
    could not run again: this is why a streamed turn costs one read more than a JSON turn."""
    with separate_instances(monkeypatch):
        a, b = Instance(), Instance()
        conversation: list[dict[str, Any]] = []
        for n, instance in enumerate((a, b, a), start=1):
            conversation.append(user(f"m{n}"))
            with instance.active():
                _, events = await agui(host, agui_body("ag-stale", conversation))
            assert types(events)[-1] == "RUN_FINISHED", events[-1]
            ((reply_id, reply),) = replies(events).items()
            assert reply.startswith(f"turn {n}:"), reply
            conversation.append({"id": reply_id, "role": "assistant", "content": reply})
    assert (await (await host.request("GET", "/api/threads/ag-stale")).json())["turns"] == 3


async def test_unreachable_storage_is_503_with_retry_after_before_any_event(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "CHECKPOINT_STORAGE",
        "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5;"
        "BlobEndpoint=http://127.0.0.1:9/devstoreaccount1;",
    )
    monkeypatch.setenv("STORAGE_TIMEOUT_SECONDS", "1")
    for messages in ([user("hi")], []):  # a run, and a reload
        raw = json.dumps(agui_body("ag-down", messages)).encode()
        response = await host.request("POST", "/api/ag-ui", body=raw, headers={"content-type": "application/json"})
        assert (response.status, response.headers["retry-after"]) == (503, "5")
        assert (await response.json())["error"]["code"] == "storage_unavailable"
