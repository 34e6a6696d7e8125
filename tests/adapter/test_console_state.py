"""A thread checkpoint's state (``GET .../checkpoints/{id}/state``) and a turn forked from an
edit of it (``POST .../checkpoints/{id}/fork``): the console's debugger, for every caller.
Through the registered functions, on real Azurite.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from devtools.function_host import FunctionHost
from functions_adapter.wiring import build_service, load_settings


async def _turn(host: FunctionHost, thread: str, body: dict[str, Any]) -> dict[str, Any]:
    response = await host.request("POST", f"/api/threads/{thread}/runs", json_body=body)
    assert response.status == 200, await response.body()
    return await response.json()


async def _state(host: FunctionHost, thread: str, checkpoint_id: str, **headers: str) -> tuple[int, Any]:
    response = await host.request("GET", f"/api/threads/{thread}/checkpoints/{checkpoint_id}/state", headers=headers)
    return response.status, await response.json()


async def _fork(host: FunctionHost, thread: str, checkpoint_id: str, body: Any, **headers: str) -> tuple[int, Any]:
    response = await host.request(
        "POST", f"/api/threads/{thread}/checkpoints/{checkpoint_id}/fork", json_body=body, headers=headers
    )
    return response.status, await response.json()


def _principal(oid: str) -> dict[str, str]:
    """Easy Auth's header for a caller (``WEBSITE_AUTH_ENABLED``): its origin is the principal."""
    claims = {"claims": [{"typ": "http://schemas.microsoft.com/identity/claims/objectidentifier", "val": oid}]}
    return {"x-ms-client-principal": base64.b64encode(json.dumps(claims).encode()).decode()}


async def test_each_executor_s_state_of_any_checkpoint_of_the_thread(host: FunctionHost) -> None:
    first = await _turn(host, "look", {"messages": "My name is Ada."})
    second = await _turn(host, "look", {"messages": "What is my name?"})
    status, body = await _state(host, "look", second["checkpoint_id"])
    assert status == 200, body
    assert body["thread_id"] == "look" and body["checkpoint_id"] == second["checkpoint_id"]
    memory = next(e for e in body["executors"] if e["executor_id"] == "memory")
    assert memory == {
        "executor_id": "memory",
        "state": {"user_texts": ["My name is Ada.", "What is my name?"], "turn": 2},
        "editable": True,
        "not_json": [],
    }
    assert body["shared_state"] == {} and body["edited"] is None
    # The first turn's checkpoint, as it was.
    status, older = await _state(host, "look", first["checkpoint_id"])
    memory = next(e for e in older["executors"] if e["executor_id"] == "memory")
    assert memory["state"] == {"user_texts": ["My name is Ada."], "turn": 1}


async def test_state_that_json_cannot_hold_is_shown_and_marked_not_editable(host: FunctionHost) -> None:
    done = await _turn(host, "steps", {"messages": "count me", "workflow": "step-pipeline"})
    status, body = await _state(host, "steps", done["checkpoint_id"])
    assert status == 200, body
    states = {e["executor_id"]: e for e in body["executors"]}
    assert states["step-1"]["editable"] and states["step-1"]["state"] == {"turn": 1, "texts": ["count me"]}
    last = states["step-10"]
    # Decoded by the restricted codec, shown as JSON, never as code.
    assert last["state"] == {"last": {"turn": 1, "text": "count me"}}
    assert last["editable"] is False
    assert last["not_json"] == ["$.last: workflows.step_pipeline.Stamp"]


async def test_state_is_the_thread_s_own_and_its_owner_s(host: FunctionHost, monkeypatch: pytest.MonkeyPatch) -> None:
    mine = await _turn(host, "mine", {"messages": "hello"})
    await _turn(host, "other", {"messages": "hello"})
    status, body = await _state(host, "other", mine["checkpoint_id"])
    assert (status, body["error"]["code"]) == (409, "checkpoint_not_in_thread")
    status, body = await _state(host, "mine", "0123456789abcdef")
    assert (status, body["error"]["code"]) == (404, "checkpoint_not_found")
    status, body = await _state(host, "mine", "bad id!")
    assert (status, body["error"]["code"]) == (400, "invalid_request")
    # A principal's thread: another principal is refused before anything is read.
    monkeypatch.setenv("WEBSITE_AUTH_ENABLED", "True")
    alice = await host.request(
        "POST", "/api/threads/alices/runs", json_body={"messages": "hi"}, headers=_principal("a11ce")
    )
    assert alice.status == 200
    checkpoint_id = (await alice.json())["checkpoint_id"]
    status, body = await _state(host, "alices", checkpoint_id, **_principal("b0b"))
    assert (status, body["error"]["code"]) == (403, "forbidden")
    status, body = await _fork(
        host, "alices", checkpoint_id, {"executor_states": {"memory": {}}, "messages": "x"}, **_principal("b0b")
    )
    assert (status, body["error"]["code"]) == (403, "forbidden")
    assert (await _state(host, "alices", checkpoint_id, **_principal("a11ce")))[0] == 200


async def test_a_turn_forked_from_edited_state_runs_on_it_and_is_marked(host: FunctionHost) -> None:
    first = await _turn(host, "travel", {"messages": "one"})
    await _turn(host, "travel", {"messages": "two"})
    edit = {"memory": {"user_texts": ["edited in the console"], "turn": 41}}
    status, body = await _fork(host, "travel", first["checkpoint_id"], {"executor_states": edit, "messages": "three"})
    assert status == 200, body
    reply = 'turn 42: you said "three". Earlier you said: "edited in the console"'
    assert body["messages"] == [{"role": "assistant", "content": reply}]
    assert body["previous_checkpoint_id"] == first["checkpoint_id"]
    # The fork is the thread's head now, in its lineage, marked edited, on the same thread.
    thread = await (await host.request("GET", "/api/threads/travel")).json()
    assert thread["checkpoint_id"] == body["checkpoint_id"]
    page = await (await host.request("GET", "/api/threads/travel/history", query="include=turn")).json()
    newest = page["checkpoints"][0]
    assert newest["checkpoint_id"] == body["checkpoint_id"]
    assert newest["thread_id"] == "travel"
    assert newest["turn"]["edited"] == {"from_checkpoint_id": first["checkpoint_id"], "executors": ["memory"]}
    status, state = await _state(host, "travel", body["checkpoint_id"])
    assert state["edited"] == newest["turn"]["edited"]
    # The edited checkpoint it forked from is untouched.
    status, original = await _state(host, "travel", first["checkpoint_id"])
    memory = next(e for e in original["executors"] if e["executor_id"] == "memory")
    assert memory["state"] == {"user_texts": ["one"], "turn": 1}
    # The next turn builds on the edit and is not marked.
    after = await _turn(host, "travel", {"messages": "four"})
    assert after["messages"][0]["content"].startswith("turn 43:")
    page = await (await host.request("GET", "/api/threads/travel/history", query="include=turn")).json()
    assert "edited" not in page["checkpoints"][0]["turn"]


async def test_an_edited_fork_streams_like_any_turn(host: FunctionHost) -> None:
    first = await _turn(host, "streamed", {"messages": "one"})
    response = await host.request(
        "POST",
        f"/api/threads/streamed/checkpoints/{first['checkpoint_id']}/fork",
        json_body={"executor_states": {"memory": {"turn": 9}}, "messages": "two", "stream": True, "events": "all"},
    )
    assert response.status == 200
    events = [item async for item in response.events()]
    names = [name for name, _ in events]
    assert names[0] == "superstep_started" and names[-1] == "done"
    assert events[-1][1]["messages"][0]["content"].startswith("turn 10:")


async def test_an_edit_of_state_json_cannot_hold_is_refused_and_changes_nothing(host: FunctionHost) -> None:
    done = await _turn(host, "refuse", {"messages": "count me", "workflow": "step-pipeline"})
    status, body = await _fork(
        host, "refuse", done["checkpoint_id"], {"executor_states": {"step-10": {"last": None}}, "messages": "again"}
    )
    assert (status, body["error"]["code"]) == (422, "state_not_editable"), body
    assert "JSON" in body["error"]["message"] and "step-10" in body["error"]["message"]
    assert body["error"]["details"] == {"executor_id": "step-10", "not_json": ["$.last: workflows.step_pipeline.Stamp"]}
    head = await build_service(load_settings()).pointers.read("refuse")
    assert head.checkpoint_id == done["checkpoint_id"] and head.turns == 1


async def test_malformed_edits_are_refused(host: FunctionHost) -> None:
    done = await _turn(host, "malformed", {"messages": "one"})
    cases: list[tuple[Any, str]] = [
        ({"messages": "x"}, "executor_states"),
        ({"executor_states": {}, "messages": "x"}, "executor_states"),
        ({"executor_states": {"memory": [1]}, "messages": "x"}, "executor_states"),
        ({"executor_states": {"memory": {"a": {"__pickled__": "gASVAAAA"}}}, "messages": "x"}, "__pickled__"),
        ({"executor_states": {"nobody": {}}, "messages": "x"}, "nobody"),
        ({"executor_states": {"memory": {}}, "messages": "x", "background": True}, "background"),
    ]
    for body, named in cases:
        status, answer = await _fork(host, "malformed", done["checkpoint_id"], body)
        assert (status, answer["error"]["code"]) == (400, "invalid_request"), (body, answer)
        assert named in str(answer["error"]), (body, answer)
    # A checkpoint outside the thread's lineage, as for any fork.
    other = await _turn(host, "elsewhere", {"messages": "one"})
    status, answer = await _fork(
        host, "malformed", other["checkpoint_id"], {"executor_states": {"memory": {}}, "messages": "x"}
    )
    assert (status, answer["error"]["code"]) == (409, "checkpoint_not_in_thread")


async def test_the_shared_state_leaves_out_the_framework_s_own_keys(host: FunctionHost) -> None:
    done = await _turn(host, "shared", {"messages": "hello"})
    saved = await build_service(load_settings()).store.load(done["checkpoint_id"])
    internal = sorted(key for key in saved.state if key.startswith("_"))
    # The framework keeps its own keys there (executor states, run arguments): none is shown.
    assert internal, saved.state.keys()
    status, body = await _state(host, "shared", done["checkpoint_id"])
    assert status == 200
    assert not [key for key in body["shared_state"] if key.startswith("_")]
    assert "_executor_state" not in str(body["shared_state"])
