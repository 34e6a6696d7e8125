"""Threads as a resource: history, fork, metadata, delete, the authorizer and expiry,
through the registered functions on real Azurite."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Mapping
from typing import Any

import pytest
from azure.core.exceptions import ResourceNotFoundError

from devtools.function_host import FunctionHost
from devtools.op_counter import OperationCounter
from functions_adapter import wiring
from functions_adapter.authorizers import thread_prefix
from resumable.base.ids import validate_id
from resumable.checkpoints import cache as checkpoint_cache
from resumable.storage.blob_records import BlobRecords, RecordConflict
from tests import recording_workflow
from tests.adapter.test_webhook_adapters import fresh_app


async def _turn(host: FunctionHost, thread: str, text: str, **extra: Any) -> tuple[int, dict[str, Any]]:
    response = await host.request("POST", f"/api/threads/{thread}/runs", json_body={"messages": text, **extra})
    return response.status, await response.json()


async def _blobs(prefix: str) -> list[str]:
    container = wiring.container_for(wiring.load_settings())
    try:
        return [b.name async for b in container.list_blobs(name_starts_with=prefix, include=["metadata"])]
    except ResourceNotFoundError:
        return []


async def _thread_checkpoints(thread: str) -> list[str]:
    container = wiring.container_for(wiring.load_settings())
    try:
        return [
            b.name
            async for b in container.list_blobs(name_starts_with="checkpoints/", include=["metadata"])
            if (b.metadata or {}).get("thread_id") == thread
        ]
    except ResourceNotFoundError:
        return []


# -- history --------------------------------------------------------------------------------


async def test_history_pages_through_250_turns_at_a_cost_proportional_to_the_page(
    host: FunctionHost, ops: OperationCounter
) -> None:
    ids = []
    for n in range(250):
        status, body = await _turn(host, "long", f"turn {n}")
        assert status == 200
        ids.append(body["checkpoint_id"])
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        ops.reset()
        query = "limit=100" + (f"&before={cursor}" if cursor else "")
        response = await host.request("GET", "/api/threads/long/history", query=query)
        page = await response.json()
        entries = page["checkpoints"]
        # One metadata read per entry, plus the pointer (whose origin is checked on every page,
        # and whose head a first page starts from): never the whole thread.
        assert ops.total == len(entries) + 1
        assert all(set(e) >= {"checkpoint_id", "previous_checkpoint_id", "timestamp", "status"} for e in entries)
        assert all("state" not in e for e in entries)
        seen += [e["checkpoint_id"] for e in entries]
        pages += 1
        cursor = page["next"]
        if cursor is None:
            break
    assert pages == 3 and seen == ids[::-1]
    default = await (await host.request("GET", "/api/threads/long/history")).json()
    assert len(default["checkpoints"]) == 20
    for bad in ("limit=0", "limit=101", "limit=x", "before=not-a-cursor"):
        assert (await host.request("GET", "/api/threads/long/history", query=bad)).status == 400


async def test_a_cursor_from_another_thread_is_refused(host: FunctionHost) -> None:
    for thread in ("a", "b"):
        await _turn(host, thread, "one")
        await _turn(host, thread, "two")
    cursor = (await (await host.request("GET", "/api/threads/a/history", query="limit=1")).json())["next"]
    assert (await host.request("GET", "/api/threads/b/history", query=f"before={cursor}")).status == 400
    assert (await host.request("GET", "/api/threads/nobody/history")).status == 404


def _forged_cursor(data: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


async def test_a_forged_cursor_naming_another_thread_s_checkpoint_is_400(host: FunctionHost) -> None:
    secret = [(await _turn(host, "alice.1", f"secret {n}"))[1]["checkpoint_id"] for n in range(2)]
    await _turn(host, "mallory.1", "hello")
    # The cursor format is readable; a caller can write one that names any checkpoint.
    forged = _forged_cursor({"t": "mallory.1", "c": secret[1]})
    response = await host.request("GET", "/api/threads/mallory.1/history", query=f"before={forged}")
    assert (response.status, (await response.json())["error"]["code"]) == (400, "invalid_request")
    # A cursor this thread's own history returned still works.
    await _turn(host, "mallory.1", "again")
    cursor = (await (await host.request("GET", "/api/threads/mallory.1/history", query="limit=1")).json())["next"]
    page = await (await host.request("GET", "/api/threads/mallory.1/history", query=f"before={cursor}")).json()
    assert len(page["checkpoints"]) == 1 and page["next"] is None


async def test_hostile_history_queries_are_400_not_500(host: FunctionHost) -> None:
    await _turn(host, "deep", "hello")
    queries = {
        # 1,100 deep is the issue's example; 3.13's parser only gives up far deeper.
        "nested 1100": "before=" + _nested_cursor(1100),
        "nested 200000": "before=" + _nested_cursor(200_000),
        "limit of 4301 digits": "limit=" + "9" * 4301,
        "long cursor": "before=" + "A" * 100_000,
        "zero-padded limit": "limit=0000000000000000000000005",
    }
    for label, query in queries.items():
        response = await host.request("GET", "/api/threads/deep/history", query=query)
        assert (response.status, (await response.json())["error"]["code"]) == (400, "invalid_request"), label


def _nested_cursor(depth: int) -> str:
    return base64.urlsafe_b64encode(b'{"t":' * depth + b"1" + b"}" * depth).decode().rstrip("=")


# -- fork -----------------------------------------------------------------------------------


async def test_fork_from_the_third_of_ten_turns(host: FunctionHost) -> None:
    ids = [(await _turn(host, "forked", f"turn {n}"))[1]["checkpoint_id"] for n in range(1, 11)]
    status, fork = await _turn(host, "forked", "a different fourth turn", from_checkpoint_id=ids[2])
    assert status == 200
    assert fork["previous_checkpoint_id"] == ids[2]
    assert "turn 4" in fork["messages"][0]["content"]
    thread = await (await host.request("GET", "/api/threads/forked")).json()
    assert thread["checkpoint_id"] == fork["checkpoint_id"] and thread["turns"] == 11
    lineage = await (await host.request("GET", "/api/threads/forked/history")).json()
    assert [e["checkpoint_id"] for e in lineage["checkpoints"]] == [fork["checkpoint_id"], ids[2], ids[1], ids[0]]
    # Like time travel elsewhere, the old head stays.
    assert (await host.request("GET", f"/api/checkpoints/{ids[9]}")).status == 200


async def test_heads_forks_moved_away_from_survive_the_sweep_however_far_back(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two forks, then more turns than the pointer's recent list holds: the daily sweep must
    keep both old heads (and their lineage) readable, and still delete a real orphan."""
    from functions_adapter import housekeeping

    ids = [(await _turn(host, "branchy", f"turn {n}"))[1]["checkpoint_id"] for n in range(1, 4)]
    first_fork = (await _turn(host, "branchy", "fork one", from_checkpoint_id=ids[0]))[1]["checkpoint_id"]
    moved_on = (await _turn(host, "branchy", "after fork one"))[1]["checkpoint_id"]
    await _turn(host, "branchy", "fork two", from_checkpoint_id=first_fork)
    for n in range(11):  # more than LINEAGE_KEPT: both old heads leave the recent list
        assert (await _turn(host, "branchy", f"later {n}"))[0] == 200
    thread = await (await host.request("GET", "/api/threads/branchy")).json()
    assert not {ids[2], moved_on} & set(thread["recent_checkpoint_ids"])
    service = wiring.build_service(wiring.load_settings())
    orphan = await service.store.load(thread["checkpoint_id"])
    orphan.checkpoint_id = "lost-race-of-branchy"
    await service.store.save(orphan, thread_id="branchy")

    monkeypatch.setattr(housekeeping, "ORPHAN_MIN_AGE_SECONDS", -1)
    await host.triggers["sweep_orphan_checkpoints"].handler(None)

    for old in (ids[2], ids[1], moved_on):
        assert (await host.request("GET", f"/api/checkpoints/{old}")).status == 200, old
    assert (await host.request("GET", "/api/checkpoints/lost-race-of-branchy")).status == 404


async def test_fork_from_another_thread_s_checkpoint_is_409(host: FunctionHost) -> None:
    other = (await _turn(host, "other", "hello"))[1]["checkpoint_id"]
    await _turn(host, "mine", "hello")
    status, body = await _turn(host, "mine", "steal", from_checkpoint_id=other)
    assert (status, body["error"]["code"]) == (409, "checkpoint_not_in_thread")
    plain = (await host.request("POST", "/api/runs", json_body={"messages": "x"})).status
    assert plain == 200
    assert (await _turn(host, "mine", "x", from_checkpoint_id="a..b"))[0] == 400


# -- metadata -------------------------------------------------------------------------------


async def test_metadata_with_etags_and_a_stale_write_is_412(host: FunctionHost) -> None:
    await _turn(host, "tagged", "hello")
    first = await host.request("PUT", "/api/threads/tagged/metadata", json_body={"ticket": "42"})
    assert first.status == 200
    etag = first.headers["etag"]
    got = await host.request("GET", "/api/threads/tagged")
    assert (await got.json())["metadata"] == {"ticket": "42"} and got.headers["etag"] == etag
    second = await host.request(
        "PUT", "/api/threads/tagged/metadata", json_body={"ticket": "43"}, headers={"If-Match": etag}
    )
    assert second.status == 200 and second.headers["etag"] != etag
    stale = await host.request(
        "PUT", "/api/threads/tagged/metadata", json_body={"ticket": "44"}, headers={"If-Match": etag}
    )
    assert (stale.status, (await stale.json())["error"]["code"]) == (412, "precondition_failed")
    assert (await (await host.request("GET", "/api/threads/tagged")).json())["metadata"] == {"ticket": "43"}
    for bad in ({"n": 1}, [1], {"k": "v" * 5000}, {f"k{i}": "v" for i in range(40)}):
        assert (await host.request("PUT", "/api/threads/tagged/metadata", json_body=bad)).status == 400


async def test_a_put_without_if_match_overwrites_even_when_eight_race(host: FunctionHost) -> None:
    """No If-Match overwrites: a write landing between a PUT's read and its write is not a
    412. Two app objects (functions hosts) on one Azurite, four PUTs each, all at once."""
    hosts = [host, FunctionHost(fresh_app())]
    bodies = [{"ticket": str(i)} for i in range(8)]
    answers = await asyncio.gather(
        *(hosts[i % 2].request("PUT", "/api/threads/raced/metadata", json_body=b) for i, b in enumerate(bodies))
    )
    statuses = [answer.status for answer in answers]
    assert statuses == [200] * 8, [(a.status, await a.json()) for a in answers]
    final = await (await host.request("GET", "/api/threads/raced")).json()
    assert final["metadata"] in bodies


@pytest.mark.parametrize("first", [True, False])
async def test_a_put_whose_answer_was_lost_is_not_412(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch, first: bool
) -> None:
    """The write landed; the SDK's retry met it (409 on a create, 412 on a replace). The
    record's write token tells that apart from another writer: 200, with the values stored."""
    if not first:
        assert (await host.request("PUT", "/api/threads/lost/metadata", json_body={"ticket": "1"})).status == 200
    hit: list[str] = []
    method = "create" if first else "replace"
    original = getattr(BlobRecords, method)

    async def landed_then_lost(self: BlobRecords, name: str, *args: Any) -> Any:
        await original(self, name, *args)
        if not hit and self._prefix == "thread-meta/":
            hit.append(name)
            raise RecordConflict(name)
        return await original(self, name, *args)  # pragma: no cover - only the first is hit

    with monkeypatch.context() as patch:
        patch.setattr(BlobRecords, method, landed_then_lost)
        response = await host.request("PUT", "/api/threads/lost/metadata", json_body={"ticket": "2"})
    assert hit, "the fault must have hit"
    assert response.status == 200, await response.json()
    got = await host.request("GET", "/api/threads/lost")
    assert (await got.json())["metadata"] == {"ticket": "2"}
    assert got.headers["etag"] == response.headers["etag"]


@pytest.mark.parametrize(
    ("if_match", "status"),
    [
        ('"a", "b"', 400),  # a list of ETags is not supported
        ('"a","b"', 400),
        ("*, *", 400),
        ("abc", 400),  # not an ETag: unquoted
        ('"a b"', 400),  # a space is not an ETag character
        ('"\u00e9"', 400),  # nor is anything outside ASCII (obs-text)
        ('W/"a"', 412),  # weak: If-Match compares strongly, so it never matches
        ('"0x8D0000000000000"', 412),  # well formed and stale
        ('W/"a", "b"', 400),
        ('"a,b"', 412),  # one well-formed ETag holding a comma: never one of ours (was a 500)
        ('"abc"', 412),  # well formed, not storage's shape: it cannot match
    ],
)
async def test_if_match_is_one_etag_or_star_checked_before_storage(
    host: FunctionHost, ops: OperationCounter, if_match: str, status: int
) -> None:
    first = await host.request("PUT", "/api/threads/tagged/metadata", json_body={"ticket": "42"})
    assert first.status == 200
    ops.reset()
    response = await host.request(
        "PUT", "/api/threads/tagged/metadata", json_body={"ticket": "43"}, headers={"If-Match": if_match}
    )
    code = {400: "invalid_request", 412: "precondition_failed"}[status]
    assert (response.status, (await response.json())["error"]["code"]) == (status, code)
    # Refused in the adapter: storage never saw the header (a stale well-formed one is refused
    # on reads: the pointer's, for the thread's origin, and the metadata's, whose ETag it is not;
    # nothing is written).
    assert ops.total == (2 if if_match.startswith('"0x') else 0)
    assert (await (await host.request("GET", "/api/threads/tagged")).json())["metadata"] == {"ticket": "42"}


# -- authorization --------------------------------------------------------------------------


def _principal(oid: str) -> str:
    claims = {"claims": [{"typ": "http://schemas.microsoft.com/identity/claims/objectidentifier", "val": oid}]}
    return base64.b64encode(json.dumps(claims).encode()).decode()


async def test_the_ready_authorizer_with_a_gateway_header(host: FunctionHost, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THREAD_AUTHORIZER", "functions_adapter.authorizers:thread_prefix_of_principal")
    monkeypatch.setenv("THREAD_PRINCIPAL_HEADER", "x-caller")
    mine = await host.request(
        "POST", "/api/threads/alice.1/runs", json_body={"messages": "hi"}, headers={"x-caller": "alice"}
    )
    assert mine.status == 200
    theirs = await host.request(
        "POST", "/api/threads/bob.1/runs", json_body={"messages": "hi"}, headers={"x-caller": "alice"}
    )
    assert (theirs.status, (await theirs.json())["error"]["code"]) == (403, "forbidden")
    assert await _thread_checkpoints("bob.1") == [] and "threads/bob.1.json" not in await _blobs("threads/")
    for route in ("/api/threads/bob.1", "/api/threads/bob.1/history"):
        assert (await host.request("GET", route, headers={"x-caller": "alice"})).status == 403
    assert (await host.request("DELETE", "/api/threads/alice.1", headers={"x-caller": "bob"})).status == 403


@pytest.mark.parametrize(
    ("principal", "thread", "allowed"),
    [
        ("team", "team.lead-1", True),
        ("team", "team-lead-1", False),  # "team-lead" is another principal
        ("team-lead", "team-lead.1", True),
        ("team", "team-lead.1", False),
        ("a.b", "a_2eb.1", True),
        ("a-b", "a_2eb.1", False),  # '.' and '-' once both became '-'
        ("a-b", "a-b.1", True),
        ("jos\u00e9", "jos_c3_a9.1", True),
        ("jos\u00e8", "jos_c3_a9.1", False),  # two accents once both became '-'
        ("@bob", "0__40bob.1", True),  # a leading non-alphanumeric still gives a usable prefix
        ("0", "0__40bob.1", False),
    ],
)
async def test_the_ready_authorizer_s_prefix_is_one_principal_s_only(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch, principal: str, thread: str, allowed: bool
) -> None:
    monkeypatch.setenv("THREAD_AUTHORIZER", "functions_adapter.authorizers:thread_prefix_of_principal")
    monkeypatch.setenv("THREAD_PRINCIPAL_HEADER", "x-caller")
    response = await host.request(
        "POST", f"/api/threads/{thread}/runs", json_body={"messages": "hi"}, headers={"x-caller": principal}
    )
    assert response.status == (200 if allowed else 403), await response.body()


def test_principal_prefixes_are_injective_prefix_free_and_valid_thread_ids() -> None:
    principals = [
        "team",
        "team-lead",
        "team-",
        "a.b",
        "a-b",
        "a_b",
        "a_2eb",
        "jos\u00e9",
        "jos\u00e8",
        "jose\u0301",
        "@bob",
        "-bob",
        "_bob",
        "0",
        "00",
        "0_",
        "0__40bob",
        "Alice",
        "alice",
        "a b",
        "a/b",
        "\u00e9",
        "\U0001f600",
        "0f3c1e2a-5b6d-4e7f-8a9b-0c1d2e3f4a5b",
        "user@example.com",
        "a..b",
        ".",
        "-",
        "_",
    ]
    prefixes = {p: thread_prefix(p) for p in principals}
    assert len(set(prefixes.values())) == len(principals)  # injective
    for p, mine in prefixes.items():
        validate_id(mine + "x", kind="thread_id")  # usable as the start of a thread ID
        for q, theirs in prefixes.items():
            assert p == q or not theirs.startswith(mine), (p, q)  # no principal owns another's threads


async def test_easy_auth_principals_are_trusted_only_when_easy_auth_is_on(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("THREAD_AUTHORIZER", "functions_adapter.authorizers:thread_prefix_of_principal")
    headers = {"X-MS-CLIENT-PRINCIPAL": _principal("0f3c")}
    refused = await host.request("POST", "/api/threads/0f3c.chat/runs", json_body={"messages": "hi"}, headers=headers)
    assert refused.status == 403  # anyone can send that header when Easy Auth is off
    monkeypatch.setenv("WEBSITE_AUTH_ENABLED", "True")
    allowed = await host.request("POST", "/api/threads/0f3c.chat/runs", json_body={"messages": "hi"}, headers=headers)
    assert allowed.status == 200


SEEN: list[dict[str, Any]] = []


def _wire(text: str) -> str:
    """``text`` as a header value arrives from the wire: its UTF-8 bytes, which ASGI hands
    over as Latin-1 characters."""
    return text.encode("utf-8").decode("latin-1")


async def test_a_non_ascii_principal_reaches_the_authorizer_as_sent(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("THREAD_AUTHORIZER", "functions_adapter.authorizers:thread_prefix_of_principal")
    monkeypatch.setenv("THREAD_PRINCIPAL_HEADER", "x-caller")
    mine = thread_prefix("Zo\u00eb \u674e") + "1"
    assert mine == "Zo_c3_ab_20_e6_9d_8e.1"
    headers = {"x-caller": _wire("Zo\u00eb \u674e")}
    response = await host.request("POST", f"/api/threads/{mine}/runs", json_body={"messages": "hi"}, headers=headers)
    assert response.status == 200, await response.body()
    monkeypatch.delenv("THREAD_PRINCIPAL_HEADER")
    monkeypatch.setenv("WEBSITE_AUTH_ENABLED", "True")
    monkeypatch.setenv("THREAD_AUTHORIZER", "tests.adapter.test_thread_management:record_headers")
    SEEN.clear()
    name = {"X-MS-CLIENT-PRINCIPAL-NAME": _wire("Zo\u00eb \u674e"), "X-MS-CLIENT-PRINCIPAL-ID": "0f3c"}
    await host.request("GET", "/api/threads/t-1", headers=name)
    assert SEEN[0]["headers"]["x-ms-client-principal-name"] == "Zo\u00eb \u674e"


def record_headers(*, route: str, thread_id: str, headers: Mapping[str, str], metadata: Mapping[str, str]) -> bool:
    """A custom authorizer for the test: records the headers it was shown."""
    SEEN.append({"headers": dict(headers)})
    return True


def support_only(*, route: str, thread_id: str, headers: Mapping[str, str], metadata: Mapping[str, str]) -> bool:
    """A custom authorizer for the test: only threads tagged channel=support."""
    SEEN.append({"route": route, "thread_id": thread_id, "metadata": dict(metadata)})
    return metadata.get("channel") == "support"


async def test_a_custom_authorizer_sees_the_thread_s_metadata(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    SEEN.clear()
    await host.request("PUT", "/api/threads/t-1/metadata", json_body={"channel": "support"})
    await host.request("PUT", "/api/threads/t-2/metadata", json_body={"channel": "sales"})
    monkeypatch.setenv("THREAD_AUTHORIZER", "tests.adapter.test_thread_management:support_only")
    assert (await _turn(host, "t-1", "hi"))[0] == 200
    assert (await _turn(host, "t-2", "hi"))[0] == 403
    assert SEEN[0] == {"route": "threads/{thread_id}/runs", "thread_id": "t-1", "metadata": {"channel": "support"}}
    monkeypatch.setenv("THREAD_AUTHORIZER", "tests.nowhere:nothing")
    assert (await _turn(host, "t-1", "hi"))[0] == 500


# -- delete ---------------------------------------------------------------------------------


async def test_delete_removes_the_thread_whole_and_a_second_delete_is_404(host: FunctionHost) -> None:
    key = {"Idempotency-Key": "turn-1"}
    first = await host.request("POST", "/api/threads/gone/runs", json_body={"messages": "one"}, headers=key)
    await _turn(host, "gone", "two")
    await host.request("PUT", "/api/threads/gone/metadata", json_body={"ticket": "9"})
    assert len(await _thread_checkpoints("gone")) == 2
    deleted = await host.request("DELETE", "/api/threads/gone")
    assert deleted.status == 204
    assert await _thread_checkpoints("gone") == []
    assert await _blobs("threads/gone") == [] and await _blobs("thread-meta/gone") == []
    assert (await host.request("GET", "/api/threads/gone")).status == 404
    again = await host.request("DELETE", "/api/threads/gone")
    assert (again.status, (await again.json())["error"]["code"]) == (404, "thread_not_found")
    # The idempotency record went too: the same key now starts the conversation afresh.
    retry = await host.request("POST", "/api/threads/gone/runs", json_body={"messages": "one"}, headers=key)
    assert (await retry.json())["checkpoint_id"] != (await first.json())["checkpoint_id"]


async def test_a_long_delete_answers_202_and_a_repeat_finishes_it(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(3):
        await _turn(host, "slow-delete", f"turn {n}")
    monkeypatch.setenv("THREAD_DELETE_SECONDS", "0.000001")
    partial = await host.request("DELETE", "/api/threads/slow-delete")
    assert partial.status == 202 and (await partial.json())["status"] == "deleting"
    # Meanwhile the thread refuses turns rather than growing again.
    assert (await _turn(host, "slow-delete", "more"))[0] == 409
    monkeypatch.delenv("THREAD_DELETE_SECONDS")
    assert (await host.request("DELETE", "/api/threads/slow-delete")).status == 204
    assert await _thread_checkpoints("slow-delete") == []


async def test_each_short_delete_goes_on_where_the_last_one_stopped(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1,500 unrelated records and a budget too short for anything: every call must move the
    deletion on (kept in the deleting pointer), so a bounded number of calls finishes it."""
    key = {"Idempotency-Key": "crowded-1"}
    await host.request("POST", "/api/threads/crowded/runs", json_body={"messages": "one"}, headers=key)
    await _turn(host, "crowded", "two")
    container = wiring.container_for(wiring.load_settings())
    gate = asyncio.Semaphore(64)

    async def unrelated(name: str, n: int) -> None:
        body = json.dumps({"thread_id": f"other-{n}"}).encode()
        async with gate:
            await container.upload_blob(name, body, metadata={"thread_id": f"other-{n}"}, overwrite=True)

    prefixes = ("checkpoints/", "idempotency/", "runs/")
    await asyncio.gather(*(unrelated(f"{p}other-{n:04d}.json", n) for p in prefixes for n in range(500)))
    mine = json.dumps({"thread_id": "crowded"}).encode()  # a background run's callback record
    await container.upload_blob("callbacks/run-of-crowded.json", mine)
    monkeypatch.setenv("THREAD_DELETE_SECONDS", "0.000001")
    pointers = wiring.build_service(wiring.load_settings()).pointers
    positions: list[object] = []
    for _ in range(15):  # pages of a few hundred names: about ten calls
        response = await host.request("DELETE", "/api/threads/crowded")
        if response.status == 204:
            break
        assert response.status == 202
        position = getattr(await pointers.read("crowded"), "deletion", None)
        assert position not in positions, f"call {len(positions) + 1} made no progress"
        positions.append(position)
    else:
        pytest.fail("15 calls did not finish deleting the thread")
    print(f"\n[delete] 1,500 unrelated records, no budget: {len(positions) + 1} calls")
    assert await _thread_checkpoints("crowded") == []
    assert await _blobs("callbacks/") == []
    for prefix in prefixes:
        assert len([n for n in await _blobs(prefix) if "other-" in n]) == 500, prefix
    assert (await host.request("GET", "/api/threads/crowded")).status == 404


async def test_a_delete_racing_a_turn_never_leaves_half_a_thread(recording: FunctionHost) -> None:
    await _turn(recording, "raced", "first")
    turn = asyncio.ensure_future(_turn(recording, "raced", "wait here"))
    await asyncio.wait_for(recording_workflow.WAITING.wait(), 10)
    deleted = await recording.request("DELETE", "/api/threads/raced")
    assert deleted.status == 204
    recording_workflow.RELEASE.set()
    status, body = await turn
    # The turn read the pointer before the delete fenced it: it fails cleanly, commits nothing.
    assert (status, body["error"]["code"]) == (409, "thread_busy")
    assert await _thread_checkpoints("raced") == []
    assert (await recording.request("GET", "/api/threads/raced")).status == 404
    # The ID is free: a new turn starts a new thread.
    status, body = await _turn(recording, "raced", "new")
    assert status == 200 and body["previous_checkpoint_id"] is None


# -- expiry ---------------------------------------------------------------------------------


async def test_an_expired_thread_restarts_with_thread_created_when_configured(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checkpoint_cache, "RETENTION_SAFE_SECONDS", 0.0)  # idle a day: no cache answers
    await _turn(host, "idle", "one")
    head = (await _turn(host, "idle", "two"))[1]["checkpoint_id"]
    container = wiring.container_for(wiring.load_settings())
    await container.delete_blob(f"checkpoints/{head}.json")  # what idle retention does
    monkeypatch.setenv("THREAD_EXPIRED", "restart")
    status, body = await _turn(host, "idle", "three")
    assert status == 200 and body["thread_created"] is True and body["previous_checkpoint_id"] is None
    thread = await (await host.request("GET", "/api/threads/idle")).json()
    assert (thread["checkpoint_id"], thread["turns"]) == (body["checkpoint_id"], 1)
    status, later = await _turn(host, "idle", "four")
    assert status == 200 and "thread_created" not in later


async def test_the_daily_timer_reads_each_thread_s_recent_lineage(host: FunctionHost, ops: OperationCounter) -> None:
    """Idle retention goes by last access; only heads are read by turns, so the timer reads the
    last ten of each thread (one ranged GET each) to keep them, and only them, alive."""
    ids = [(await _turn(host, "kept", f"turn {n}"))[1]["checkpoint_id"] for n in range(12)]
    ops.reset()
    await host.triggers["sweep_orphan_checkpoints"].handler(None)
    read = {
        url.rsplit("/", 1)[1].removesuffix(".json")
        for method, url in ops.log
        if method == "GET" and "/checkpoints/" in url
    }
    assert read == set(ids[-10:])
