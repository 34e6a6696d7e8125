"""What the web console needs of the API, added for every caller: a history page with each
turn (``include=turn``), a replaced branch's history (``from``), ``replaced_head_id``, a
workflow's graph (``GET /api/workflows/{name}``), and the console's own routes (on only with
``CONSOLE_ENABLED``, its files only, every answer under a strict policy). Through the
registered functions, on real Azurite.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from devtools.function_host import FunctionHost
from devtools.op_counter import OperationCounter
from functions_adapter.console import pages

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


async def _turn(host: FunctionHost, thread: str, **body: Any) -> dict[str, Any]:
    response = await host.request("POST", f"/api/threads/{thread}/runs", json_body=body)
    assert response.status == 200, await response.json()
    return await response.json()


async def _history(host: FunctionHost, thread: str, query: str = "") -> tuple[int, dict[str, Any]]:
    response = await host.request("GET", f"/api/threads/{thread}/history", query=query)
    return response.status, await response.json()


# -- history with each turn ------------------------------------------------------------------


async def test_a_page_with_each_turn_holds_its_messages_and_its_pending_requests(host: FunctionHost) -> None:
    await _turn(host, "turns", messages="My name is Ada.")
    paused = await _turn(host, "turns", messages="Ship it after approval")
    status, page = await _history(host, "turns", "include=turn")
    assert status == 200
    newest, oldest = page["checkpoints"]
    assert oldest["turn"] == {
        "in": [{"role": "user", "content": "My name is Ada."}],
        "out": [{"role": "assistant", "content": 'turn 1: you said "My name is Ada.". Earlier you said: nothing yet'}],
        "pending_requests": [],
    }
    # The pending request, with its data, exactly as the turn's own answer gave it.
    assert newest["turn"]["in"] == [{"role": "user", "content": "Ship it after approval"}]
    assert newest["turn"]["out"] == []
    assert newest["turn"]["pending_requests"] == paused["pending_requests"]
    assert newest["turn"]["pending_requests"][0]["data"]["text"] == "Ship it after approval"
    # Without include, the entries are as before: metadata only.
    plain = (await _history(host, "turns"))[1]["checkpoints"]
    assert [{k: v for k, v in e.items() if k != "turn"} for e in page["checkpoints"]] == plain
    assert all("turn" not in e for e in plain)


async def test_a_page_with_each_turn_costs_what_a_page_without_them_does(
    host: FunctionHost, ops: OperationCounter
) -> None:
    for n in range(12):
        await _turn(host, "costly", messages=f"turn {n}")
    costs = {}
    for query in ("limit=5", "limit=5&include=turn"):
        ops.reset()
        status, page = await _history(host, "costly", query)
        assert status == 200 and len(page["checkpoints"]) == 5
        costs[query] = ops.total
        ops.reset()
        status, after = await _history(host, "costly", f"{query}&before={page['next']}")
        assert status == 200 and len(after["checkpoints"]) == 5
        costs[f"{query} (next page)"] = ops.total
    # One read per entry, and the pointer once (the origin check reads the head it starts from).
    assert costs == {
        "limit=5": 6,
        "limit=5 (next page)": 6,
        "limit=5&include=turn": 6,
        "limit=5&include=turn (next page)": 6,
    }


@pytest.mark.parametrize("query", ["include=turns", "include=", "include=turn&include=state", "include=" + "x" * 5000])
async def test_include_takes_only_turn(host: FunctionHost, query: str) -> None:
    await _turn(host, "picky", messages="hi")
    status, body = await _history(host, "picky", query)
    assert (status, body["error"]["code"]) == (400, "invalid_request")


# -- a replaced branch ------------------------------------------------------------------------


async def test_from_walks_the_branch_a_fork_replaced(host: FunctionHost) -> None:
    ids = [(await _turn(host, "branch", messages=f"turn {n}"))["checkpoint_id"] for n in range(1, 5)]
    fork = await _turn(host, "branch", messages="another second", from_checkpoint_id=ids[0])
    _, head_line = await _history(host, "branch")
    assert [e["checkpoint_id"] for e in head_line["checkpoints"]] == [fork["checkpoint_id"], ids[0]]
    assert head_line["checkpoints"][0]["replaced_head_id"] == ids[3]
    assert head_line["checkpoints"][1]["replaced_head_id"] is None
    status, branch = await _history(host, "branch", f"from={ids[3]}&limit=2&include=turn")
    assert status == 200
    assert [e["checkpoint_id"] for e in branch["checkpoints"]] == [ids[3], ids[2]]
    assert branch["checkpoints"][0]["turn"]["in"] == [{"role": "user", "content": "turn 4"}]
    status, rest = await _history(host, "branch", f"before={branch['next']}")
    assert status == 200 and [e["checkpoint_id"] for e in rest["checkpoints"]] == [ids[1], ids[0]]
    # The checkpoint says the same.
    info = await (await host.request("GET", f"/api/checkpoints/{fork['checkpoint_id']}")).json()
    assert info["replaced_head_id"] == ids[3]


async def test_from_never_reads_another_thread(host: FunctionHost, ops: OperationCounter) -> None:
    secret = (await _turn(host, "alice.2", messages="a secret"))["checkpoint_id"]
    await _turn(host, "mallory.2", messages="hello")
    ops.reset()
    status, body = await _history(host, "mallory.2", f"from={secret}&include=turn")
    assert (status, body["error"]["code"]) == (400, "invalid_request")
    assert "secret" not in str(body)
    status, body = await _history(host, "mallory.2", "from=no-such-checkpoint")
    assert (status, body["error"]["code"]) == (404, "checkpoint_not_found")
    for bad in ("from=../threads/alice.2", "from=" + "a" * 500, "from=a..b"):
        status, body = await _history(host, "mallory.2", bad)
        assert (status, body["error"]["code"]) == (400, "invalid_request"), bad
    _, page = await _history(host, "mallory.2", "limit=1")
    mine = page["checkpoints"][0]["checkpoint_id"]
    status, body = await _history(host, "mallory.2", f"from={mine}&before=anything")
    assert (status, body["error"]["code"]) == (400, "invalid_request")


# -- a workflow's graph -----------------------------------------------------------------------


async def test_a_workflow_s_graph_and_signature(host: FunctionHost) -> None:
    from workflows.default_conversation import build_workflow

    response = await host.request("GET", "/api/workflows/default")
    assert response.status == 200
    body = await response.json()
    assert body == {
        "name": "default",
        "default": True,
        "policy": "pinned",
        "versions": [
            {
                "version": "v1",
                "newest": True,
                "workflow_name": "conversation-demo",
                "signature": build_workflow().graph_signature_hash,
                "graph": {
                    "start": "memory",
                    "executors": [
                        {"id": "memory", "type": "ConversationMemory"},
                        {"id": "responder", "type": "Responder"},
                    ],
                    "edges": [{"source": "memory", "target": "responder", "kind": "SingleEdgeGroup"}],
                },
            }
        ],
    }


async def test_a_version_that_cannot_be_built_here_says_why(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AZURE_OPENAI_ENDPOINT", "OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)
    response = await host.request("GET", "/api/workflows/chat-agents")
    assert response.status == 200
    (version,) = (await response.json())["versions"]
    assert version["graph"] is None and version["signature"] is None
    assert "OPENAI" in version["graph_unavailable"] and "Traceback" not in version["graph_unavailable"]


@pytest.mark.parametrize(
    ("name", "status", "code"),
    [("nope", 404, "workflow_not_found"), ("default@v1", 400, "invalid_request"), ("a" * 300, 400, "invalid_request")],
)
async def test_a_workflow_that_is_not_hosted(host: FunctionHost, name: str, status: int, code: str) -> None:
    response = await host.request("GET", f"/api/workflows/{name}")
    assert (response.status, (await response.json())["error"]["code"]) == (status, code)


# -- the console's routes ---------------------------------------------------------------------


def _secured(response: Any) -> None:
    headers = {k.lower(): v for k, v in response.headers.items()}
    assert headers["content-security-policy"] == CSP
    assert headers["cache-control"] == "no-store"
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "no-referrer"
    assert headers["x-frame-options"] == "DENY"


async def test_the_console_is_served_only_when_it_is_on(host: FunctionHost, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONSOLE_ENABLED", "true")
    page = await host.request("GET", "/api/console")
    assert page.status == 200 and page.headers["content-type"] == "text/html; charset=utf-8"
    assert b"/api/console/console.js" in await page.body()
    _secured(page)
    script = await host.request("GET", "/api/console/console.js")
    assert script.status == 200 and script.headers["content-type"] == "text/javascript; charset=utf-8"
    _secured(script)
    for value in ("false", "", "0"):
        monkeypatch.setenv("CONSOLE_ENABLED", value)
        for path in ("/api/console", "/api/console/console.js"):
            off = await host.request("GET", path)
            assert (off.status, (await off.json())["error"]["code"]) == (404, "not_found")
            _secured(off)
    monkeypatch.setenv("CONSOLE_ENABLED", "yes please")
    broken = await host.request("GET", "/api/console")
    assert (broken.status, (await broken.json())["error"]["code"]) == (500, "server_misconfigured")
    assert b"yes please" not in await broken.body()


@pytest.mark.parametrize(
    "asset",
    [
        "..%2Fpages.py",
        "..%2F..%2Fhost.json",
        "pages.py",
        "index.html.bak",
        "Console.js",
        ".hidden.js",
        "x.map",
        "nope.js",
        "index.html",
    ],
)
async def test_only_the_console_s_own_files_are_served(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch, asset: str
) -> None:
    monkeypatch.setenv("CONSOLE_ENABLED", "true")
    response = await host.request("GET", f"/api/console/{asset}")
    assert (response.status, (await response.json())["error"]["code"]) == (404, "not_found")
    _secured(response)


def test_every_file_the_page_loads_is_one_the_route_serves() -> None:
    served = pages.files()
    assert set(served) >= {"index.html", "console.js", "console.css", "icon.svg"}
    assert all(name == pages.PAGE or name.rsplit(".", 1)[1] in {"js", "css", "svg", "png"} for name in served)


# -- what each answer cost in storage ---------------------------------------------------------


async def test_each_answer_says_how_many_storage_operations_it_made(host: FunctionHost, ops: OperationCounter) -> None:
    for n in range(8):
        ops.reset()
        response = await host.request("POST", "/api/threads/counted/runs", json_body={"messages": f"turn {n}"})
        assert response.status == 200
        assert int(response.headers["x-storage-operations"]) == ops.total > 0
        assert response.headers["cache-control"] == "no-store"
    # Two requests at once keep their own counts: the pointer twice and one read per entry.
    pages = await asyncio.gather(
        *(host.request("GET", "/api/threads/counted/history", query=f"limit={n}") for n in (5, 2, 5, 2))
    )
    assert [int(p.headers["x-storage-operations"]) for p in pages] == [6, 3, 6, 3]
    refused = await host.request("GET", "/api/threads/counted/history", query="limit=0")
    assert (refused.status, refused.headers["x-storage-operations"]) == (400, "0")


async def test_a_stream_carries_no_count(host: FunctionHost) -> None:
    response = await host.request(
        "POST", "/api/threads/streamed/runs", json_body={"messages": "hi"}, headers={"accept": "text/event-stream"}
    )
    assert response.is_stream and "x-storage-operations" not in response.headers
    assert [name async for name, _ in response.events()][-1] == "done"
