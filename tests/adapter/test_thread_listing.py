"""``GET /api/threads``: pages over many threads, prefixes, the authorizer, tombstones and
hostile parameters, through the registered function on real Azurite."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

import pytest

from devtools.function_host import FunctionHost
from devtools.op_counter import OperationCounter
from functions_adapter import wiring
from resumable.storage import clients as storage_client
from resumable.threads.delete_progress import DeleteProgress
from resumable.threads.pointers import ThreadPointers


async def _turn(host: FunctionHost, thread: str, text: str = "hi") -> dict[str, Any]:
    response = await host.request("POST", f"/api/threads/{thread}/runs", json_body={"messages": text})
    assert response.status == 200, await response.body()
    return await response.json()


async def _list(host: FunctionHost, query: str = "", **headers: str) -> tuple[int, dict[str, Any]]:
    response = await host.request("GET", "/api/threads", query=query.removeprefix("?"), headers=headers or None)
    return response.status, await response.json()


async def _all(host: FunctionHost, query: str, **headers: str) -> tuple[list[dict[str, Any]], int]:
    """Every thread over every page, and how many pages it took."""
    found: list[dict[str, Any]] = []
    cursor, pages = None, 0
    while True:
        suffix = f"&cursor={cursor}" if cursor else ""
        status, body = await _list(host, f"{query}{suffix}", **headers)
        assert status == 200, body
        found += body["threads"]
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            return found, pages


async def test_pages_cover_every_thread_once_at_a_cost_bounded_by_the_page(
    host: FunctionHost, ops: OperationCounter
) -> None:
    heads = {f"p.{n:02d}": (await _turn(host, f"p.{n:02d}"))["checkpoint_id"] for n in range(7)}
    await host.request("PUT", "/api/threads/p.03/metadata", json_body={"channel": "C1"})
    ops.reset()
    status, first = await _list(host, "?limit=3")
    assert status == 200 and len(first["threads"]) == 3 and first["next_cursor"]
    assert ops.total <= 2 * 3 + 1, ops.counts  # one listing, a pointer and a metadata read per thread
    found, pages = await _all(host, "?limit=3")
    assert pages == 3
    assert {t["thread_id"]: t["checkpoint_id"] for t in found} == heads
    by_id = {t["thread_id"]: t for t in found}
    assert by_id["p.03"]["metadata"] == {"channel": "C1"} and by_id["p.00"]["metadata"] == {}
    assert all(isinstance(t["updated_at"], float) for t in found)


async def test_a_prefix_lists_only_the_threads_that_start_with_it(host: FunctionHost) -> None:
    for thread in ("alice.1", "alice.2", "alicea.1", "bob.1"):
        await _turn(host, thread)
    found, _ = await _all(host, "?prefix=alice.&limit=1")
    assert sorted(t["thread_id"] for t in found) == ["alice.1", "alice.2"]
    status, body = await _list(host, "?prefix=nobody.")
    assert (status, body) == (200, {"threads": [], "next_cursor": None})


async def test_a_thread_being_deleted_is_not_listed(host: FunctionHost) -> None:
    await _turn(host, "d.live")
    await _turn(host, "d.gone")
    pointers = ThreadPointers(wiring.container_for(wiring.load_settings()))
    head = await pointers.read("d.gone")
    # A delete that stopped after its tombstone (a crash, or its deadline): the pointer stays.
    marked = await pointers.update(lambda p: p.marked_deleting(DeleteProgress(found=True)), current=head)
    assert marked is not None and marked.deleting
    found, _ = await _all(host, "?prefix=d.")
    assert [t["thread_id"] for t in found] == ["d.live"]
    assert (await host.request("DELETE", "/api/threads/d.live")).status == 204
    assert (await _all(host, "?prefix=d."))[0] == []


SEEN: list[dict[str, Any]] = []


def tagged_for_caller(*, route: str, thread_id: str, headers: Mapping[str, str], metadata: Mapping[str, str]) -> bool:
    """A test authorizer: a thread is the caller's if its metadata names the caller."""
    SEEN.append({"route": route, "thread_id": thread_id})
    return metadata.get("owner") == headers.get("x-caller")


async def test_with_an_authorizer_only_the_caller_s_threads_are_listed(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(6):
        await _turn(host, f"a.{n}")
        owner = "alice" if n % 2 == 0 else "bob"
        await host.request("PUT", f"/api/threads/a.{n}/metadata", json_body={"owner": owner})
    SEEN.clear()
    monkeypatch.setenv("THREAD_AUTHORIZER", "tests.adapter.test_thread_listing:tagged_for_caller")
    found, pages = await _all(host, "?limit=2", **{"x-caller": "alice"})
    assert sorted(t["thread_id"] for t in found) == ["a.0", "a.2", "a.4"]
    assert pages == 3  # pages of 2 names, each with one of alice's: never read further to fill a page
    assert {seen["route"] for seen in SEEN} == {"list"} and len(SEEN) == 6
    assert (await _all(host, "", **{"x-caller": "carol"}))[0] == []
    assert (await _all(host, ""))[0] == []


async def test_the_ready_authorizer_lists_only_the_principal_s_threads(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("THREAD_AUTHORIZER", "functions_adapter.authorizers:thread_prefix_of_principal")
    monkeypatch.setenv("THREAD_PRINCIPAL_HEADER", "x-caller")
    for thread in ("alice.1", "alice.2", "bob.1"):
        caller = thread.split(".")[0]
        turn = await host.request(
            "POST", f"/api/threads/{thread}/runs", json_body={"messages": "hi"}, headers={"x-caller": caller}
        )
        assert turn.status == 200
    found, _ = await _all(host, "", **{"x-caller": "alice"})
    assert sorted(t["thread_id"] for t in found) == ["alice.1", "alice.2"]
    found, _ = await _all(host, "?prefix=bob.", **{"x-caller": "alice"})
    assert found == []


def _forged(data: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "query",
    [
        "?limit=0",
        "?limit=101",
        "?limit=-1",
        "?limit=abc",
        "?limit=" + "9" * 5000,
        "?limit=%C2%B2",
        "?prefix=../x",
        "?prefix=.x",
        "?prefix=a%2Fb",
        "?prefix=" + "a" * 200,
        "?cursor=%%%",
        "?cursor=" + "A" * 5000,
        "?cursor=" + _forged({"p": "", "t": ""}),
        "?cursor=" + _forged({"p": "other.", "t": "x"}),
        "?cursor=" + _forged([1, 2]),
        "?cursor=" + _forged({"p": "", "t": 5}),
        "?cursor=" + base64.urlsafe_b64encode(b"[" * 3000).decode(),
    ],
)
async def test_hostile_parameters_are_400_never_500(host: FunctionHost, query: str) -> None:
    await _turn(host, "h.1")
    status, body = await _list(host, query)
    assert status == 400, body
    assert body["error"]["code"] == "invalid_request"


def _refuse_listings_with_a_marker(request: Any) -> None:
    """At the SDK boundary: a listing that carries a marker gets a parameter storage refuses
    with 400, as Azure refuses a marker it did not make (Azurite accepts any marker)."""
    http = request.http_request
    if "comp=list" in http.url and "marker=" in http.url:
        http.url = http.url.replace("maxresults=", "maxresults=x")


async def test_a_cursor_storage_refuses_is_400_and_any_other_refusal_stays_ours(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(3):
        await _turn(host, f"c.{n}")
    _, first = await _list(host, "?limit=1")
    monkeypatch.setattr(storage_client, "request_hook", _refuse_listings_with_a_marker)
    await storage_client.close_all()
    status, body = await _list(host, f"?limit=1&cursor={first['next_cursor']}")
    assert (status, body["error"]["code"]) == (400, "invalid_request"), body
    monkeypatch.setattr(storage_client, "request_hook", _refuse_all_listings)
    await storage_client.close_all()
    status, body = await _list(host, "?limit=1")
    assert (status, body["error"]["code"]) == (500, "server_misconfigured"), body


def _refuse_all_listings(request: Any) -> None:
    http = request.http_request
    if "comp=list" in http.url:
        http.url = http.url.replace("maxresults=", "maxresults=x")


async def test_a_thread_another_origin_made_is_not_listed(host: FunctionHost, monkeypatch: pytest.MonkeyPatch) -> None:
    # No authorizer at all: the thread's recorded origin alone decides, as on every thread route.
    monkeypatch.setenv("THREAD_PRINCIPAL_HEADER", "x-caller")
    for caller, thread in (("alice", "o.1"), ("bob", "o.2"), ("alice", "o.3")):
        turn = await host.request(
            "POST", f"/api/threads/{thread}/runs", json_body={"messages": "hi"}, headers={"x-caller": caller}
        )
        assert turn.status == 200
    await _turn(host, "o.4")  # a function-key caller with no principal: the "api" origin
    assert sorted(t["thread_id"] for t in (await _all(host, "", **{"x-caller": "alice"}))[0]) == ["o.1", "o.3"]
    assert [t["thread_id"] for t in (await _all(host, "", **{"x-caller": "bob"}))[0]] == ["o.2"]
    assert [t["thread_id"] for t in (await _all(host, ""))[0]] == ["o.4"]
