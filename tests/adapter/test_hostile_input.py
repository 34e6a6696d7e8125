"""Every bounded parameter of every route, fed hostile values: huge digit strings, negatives,
floats, lists, objects. Each is a 400 ``invalid_request`` that names what is wrong, never a
500 and never big-number work (``functions_adapter/params.py`` is the one parser)."""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from typing import Any

import pytest

from devtools.function_host import FunctionHost, HostResponse

HUGE = "9" * 5000
# Query and header values that are not a whole number in range.
NUMBERS = [HUGE, "0" * 5000 + "1" + "0" * 4400, "-1", "1.5", "1e3", "0x10", "[1]", "{}", "", " 1", "\uff11", "\u00b2"]
# JSON values that are not one of an enum's strings.
# Header values travel as Latin-1 bytes: those a header can carry.
HEADER_NUMBERS = [v for v in NUMBERS if v.isascii() or v == "\u00b2"]
ENUMS: list[Any] = [["user"], {"role": "user"}, 1, 1.5, None, True, "", "USER "]


async def _error(response: HostResponse) -> dict[str, Any]:
    body = await asyncio.wait_for(response.json(), 5)
    assert isinstance(body, dict) and "error" in body, body
    return body["error"]


def _q(name: str, value: str) -> str:
    return urllib.parse.urlencode({name: value})


async def _response(host: FunctionHost) -> str:
    created = await host.request("POST", "/api/responses", json_body={"input": "hello"})
    assert created.status == 200, await created.body()
    return str((await created.json())["id"])


async def test_responses_paging_and_cursor_numbers(host: FunctionHost) -> None:
    response_id = await _response(host)
    cases = [(f"/api/responses/{response_id}/input_items", "limit", "")]
    cases += [(f"/api/responses/{response_id}", "starting_after", "stream=true&")]
    cases += [(f"/api/responses/{response_id}/input_items", "limit", "order=asc&")]
    for path, name, prefix in cases:
        for value in NUMBERS if name == "starting_after" else [*NUMBERS, "0", "101"]:
            answer = await host.request("GET", path, query=prefix + _q(name, value))
            error = await _error(answer)
            assert (answer.status, error["code"], error.get("param")) == (400, "invalid_request", name), (name, value)
            assert name in error["message"]


async def test_responses_enums_in_the_query(host: FunctionHost) -> None:
    response_id = await _response(host)
    for path, name in [
        (f"/api/responses/{response_id}", "stream"),
        (f"/api/responses/{response_id}/input_items", "order"),
    ]:
        for value in ["yes", "1", "TRUE", "[]", "", "\u00b2", HUGE]:
            answer = await host.request("GET", path, query=_q(name, value))
            error = await _error(answer)
            assert (answer.status, error["code"], error.get("param")) == (400, "invalid_request", name), (name, value)


@pytest.mark.parametrize("value", ENUMS, ids=repr)
async def test_response_input_roles_and_types(host: FunctionHost, value: Any) -> None:
    for item, param in [
        ({"role": value, "content": "hi"}, "input[0].role"),
        ({"type": "message", "role": value, "content": "hi"}, "input[0].role"),
        ({"type": value, "role": "user", "content": "hi"}, "input[0]"),
    ]:
        answer = await host.request("POST", "/api/responses", json_body={"input": [item]})
        error = await _error(answer)
        assert (answer.status, error["code"], error.get("param")) == (400, "invalid_request", param), item


@pytest.mark.parametrize("value", ENUMS, ids=repr)
async def test_run_roles_and_multitask(host: FunctionHost, value: Any) -> None:
    for path, body, name in [
        ("/api/runs", {"messages": [{"role": value, "content": "hi"}]}, "messages[0].role"),
        ("/api/threads/t1/runs", {"messages": [{"role": value, "content": "hi"}]}, "messages[0].role"),
        ("/api/threads/t1/runs", {"messages": "hi", "multitask": value}, "multitask"),
    ]:
        if name == "multitask" and value is None:
            continue  # null is "not given": the default
        answer = await host.request("POST", path, json_body=body)
        error = await _error(answer)
        assert (answer.status, error["code"]) == (400, "invalid_request"), (path, body)
        assert name in error["message"]


async def test_history_limit(host: FunctionHost) -> None:
    turn = await host.request("POST", "/api/threads/t1/runs", json_body={"messages": "hi"})
    assert turn.status == 200
    for value in [*NUMBERS, "0", "101"]:
        answer = await host.request("GET", "/api/threads/t1/history", query=_q("limit", value))
        error = await _error(answer)
        assert (answer.status, error["code"]) == (400, "invalid_request"), value
        assert "limit" in error["message"]


async def test_thread_listing_and_conversation_items(host: FunctionHost) -> None:
    created = await host.request("POST", "/api/conversations", json_body={})
    items = f"/api/conversations/{(await created.json())['id']}/items"
    for path in ("/api/threads", items):
        for value in [*NUMBERS, "0", "101"]:
            answer = await host.request("GET", path, query=_q("limit", value))
            error = await _error(answer)
            param = error.get("param") or error.get("details", {}).get("param")  # OpenAI's shape, or ours
            assert (answer.status, error["code"], param) == (400, "invalid_request", "limit"), value
    for value in ["ASC", "", "[]", "\u00b2", HUGE]:
        answer = await host.request("GET", items, query=_q("order", value))
        assert (answer.status, (await _error(answer)).get("param")) == (400, "order"), value
    for value in ["../x", ".x", "a/b", "a" * 200, "\u00e9"]:
        answer = await host.request("GET", "/api/threads", query=_q("prefix", value))
        assert (answer.status, (await _error(answer))["code"]) == (400, "invalid_request"), value


async def test_background_headers(host: FunctionHost, queue_env: str) -> None:
    accepted = await host.request(
        "POST", "/api/runs", json_body={"messages": "stay"}, headers={"Prefer": "respond-async"}
    )
    run_id = (await accepted.json())["run_id"]
    for value in HEADER_NUMBERS:
        if value == "":
            continue  # an empty Last-Event-ID means "from the start"; an empty wait is below
        answer = await host.request("GET", f"/api/runs/{run_id}/stream", headers={"Last-Event-ID": f"1.{value}"})
        assert (answer.status, (await _error(answer))["code"]) == (400, "invalid_request"), value
    for value in HEADER_NUMBERS:
        if value == " 1":
            continue  # RFC 7240 allows whitespace around '=': "wait= 1" is a wait of 1 s
        answer = await host.request("GET", f"/api/runs/{run_id}", headers={"Prefer": f"wait={value}"})
        assert (answer.status, (await _error(answer))["code"]) == (400, "invalid_request"), value


async def test_content_length(host: FunctionHost) -> None:
    body = json.dumps({"messages": "hi"}).encode()
    routes = [("POST", "/api/runs"), ("POST", "/api/responses"), ("POST", "/api/threads/t1/runs")]
    routes += [("POST", "/api/conversations"), ("POST", "/api/conversations/c1")]
    for method, path in [*routes, ("PUT", "/api/threads/t1/metadata")]:
        for value, status in [(HUGE, 413), ("-1", 400), ("1.5", 400), ("[1]", 400), ("\u00b2", 400)]:
            headers = {"content-type": "application/json", "content-length": value}
            answer = await host.request(method, path, body=body, headers=headers)
            assert answer.status == status, (path, value, await answer.body())


async def test_malformed_json_says_what_and_where(host: FunctionHost) -> None:
    cases = [
        (b"", "The body is empty"),
        (b'{"messages": "hi",\n "stream": tru}', "line 2, column 12"),
        # Python's json names the trailing comma from 3.13 on; 3.11 and 3.12 the next character
        (b'{"messages": "hi",}', "at line 1, column 1"),
        (b"\xff{}", "not UTF-8: byte 0xff at offset 0"),
        (b"[1]", "must be a JSON object, not an array"),
    ]
    for path in ("/api/runs", "/api/responses", "/api/threads/t1/runs", "/api/conversations", "/api/conversations/c1"):
        for body, said in cases:
            if body == b"" and path.startswith("/api/conversations"):
                continue  # a conversation's create and update bodies are all optional: empty is {}
            answer = await host.request("POST", path, body=body, headers={"content-type": "application/json"})
            error = await _error(answer)
            assert (answer.status, error["code"]) == (400, "invalid_request"), (path, body)
            assert said in error["message"], (path, error["message"])
