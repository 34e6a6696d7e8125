"""The OpenAI Conversations-compatible routes, driven by the unmodified ``openai`` SDK
against the in-process app (its HTTP client's transport hands each request to the
registered function) on real Azurite, with the default workflow.

A conversation is a thread: created before its first turn, continued by
``responses.create(conversation=...)``, its items read back from its turns' checkpoints,
deleted whole. The same SDK calls through ``scripts/serve.sh``: ``tests/e2e/test_conversations_live.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx2 as httpx
import openai
import pytest
from openai import AsyncOpenAI

from devtools.function_host import FunctionHost
from devtools.op_counter import OperationCounter
from functions_adapter import wiring


class HostTransport(httpx.AsyncBaseTransport):
    """httpx → the in-process function host: the SDK's requests, unmodified, to our routes."""

    def __init__(self, host: FunctionHost) -> None:
        self.host = host

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        headers = {k: v for k, v in request.headers.items() if k.lower() != "content-length"}
        answered = await self.host.request(
            request.method, request.url.path, body=body, headers=headers, query=request.url.query.decode()
        )
        return httpx.Response(answered.status, headers=answered.headers, content=await answered.body())


@pytest.fixture
async def client(host: FunctionHost) -> AsyncIterator[AsyncOpenAI]:
    transport = httpx.AsyncClient(transport=HostTransport(host))
    yield AsyncOpenAI(base_url="http://app/api", api_key="local", http_client=transport, max_retries=0)
    await transport.aclose()


async def _say(client: AsyncOpenAI, conversation: str, text: str) -> str:
    response = await client.responses.create(input=text, conversation=conversation)
    return response.output_text


async def test_create_retrieve_update_delete(client: AsyncOpenAI) -> None:
    created = await client.conversations.create(metadata={"channel": "C1"})
    assert created.id.startswith("conv_") and created.object == "conversation"
    assert created.metadata == {"channel": "C1"} and created.created_at > 1_700_000_000
    fetched = await client.conversations.retrieve(created.id)
    assert fetched.model_dump() == created.model_dump()
    updated = await client.conversations.update(created.id, metadata={"channel": "C2"})
    assert updated.metadata == {"channel": "C2"} and updated.created_at == created.created_at
    assert (await client.conversations.retrieve(created.id)).metadata == {"channel": "C2"}
    deleted = await client.conversations.delete(created.id)
    assert (deleted.id, deleted.deleted, deleted.object) == (created.id, True, "conversation.deleted")
    for call in (
        client.conversations.retrieve(created.id),
        client.conversations.delete(created.id),
        client.conversations.update(created.id, metadata={}),
        client.conversations.items.list(created.id),
    ):
        with pytest.raises(openai.NotFoundError) as raised:
            await call
        assert raised.value.code == "conversation_not_found"
        assert raised.value.response.headers["x-should-retry"] == "false"


async def test_a_new_conversation_exists_before_its_first_turn_and_responses_continue_it(
    client: AsyncOpenAI, host: FunctionHost
) -> None:
    conv = await client.conversations.create()
    assert conv.metadata == {}
    empty = await client.conversations.items.list(conv.id)
    assert (empty.data, empty.has_more, empty.first_id, empty.last_id) == ([], False, None, None)
    thread = await host.request("GET", f"/api/threads/{conv.id}")
    assert thread.status == 200 and (await thread.json())["turns"] == 0
    assert "turn 1" in await _say(client, conv.id, "first")
    second = await _say(client, conv.id, "second")
    assert "turn 2" in second and '"first"' in second
    thread = await host.request("GET", f"/api/threads/{conv.id}")
    assert (await thread.json())["turns"] == 2


async def test_items_are_the_thread_s_messages_in_either_order_a_page_at_a_time(client: AsyncOpenAI) -> None:
    conv = await client.conversations.create()
    replies = [await _say(client, conv.id, f"message {n}") for n in range(3)]
    oldest_first = [item async for item in client.conversations.items.list(conv.id, order="asc", limit=2)]
    assert [(i.role, i.content[0].type, i.content[0].text) for i in oldest_first] == [
        pair
        for n in range(3)
        for pair in (("user", "input_text", f"message {n}"), ("assistant", "output_text", replies[n]))
    ]
    newest_first = [item async for item in client.conversations.items.list(conv.id, limit=4)]
    assert [i.id for i in newest_first] == [i.id for i in reversed(oldest_first)]
    assert all(i.type == "message" and i.status == "completed" for i in newest_first)
    page = await client.conversations.items.list(conv.id, limit=2, order="desc")
    assert page.has_more and page.last_id == newest_first[1].id
    rest = await client.conversations.items.list(conv.id, after=page.last_id, limit=100, order="desc")
    assert [i.id for i in rest.data] == [i.id for i in newest_first[2:]] and not rest.has_more
    later = await client.conversations.items.list(conv.id, after=oldest_first[2].id, order="asc", limit=2)
    assert [i.id for i in later.data] == [i.id for i in oldest_first[3:5]] and later.has_more


async def test_a_conversation_started_by_its_first_turn_is_a_conversation_too(client: AsyncOpenAI) -> None:
    await _say(client, "ticket-42", "hello")
    fetched = await client.conversations.retrieve("ticket-42")
    assert (fetched.id, fetched.metadata) == ("ticket-42", {}) and fetched.created_at > 0
    items = await client.conversations.items.list("ticket-42", order="asc")
    assert [i.role for i in items.data] == ["user", "assistant"]


async def test_another_thread_s_item_or_a_malformed_one_is_not_a_cursor(client: AsyncOpenAI) -> None:
    mine, theirs = await client.conversations.create(), await client.conversations.create()
    await _say(client, mine.id, "mine")
    await _say(client, theirs.id, "theirs")
    their_item = (await client.conversations.items.list(theirs.id)).data[0].id
    for after in (their_item, "msg_nope_0", "x" * 300, "msg_../x_1"):
        for order in ("asc", "desc"):
            with pytest.raises(openai.BadRequestError) as raised:
                await client.conversations.items.list(mine.id, after=after, order=order)  # type: ignore[arg-type]
            assert raised.value.body["param"] == "after"  # type: ignore[index]


@pytest.mark.parametrize(
    "query", ["limit=0", "limit=101", "limit=" + "9" * 5000, "limit=-1", "order=sideways", "order=ASC"]
)
async def test_hostile_item_parameters_are_400(client: AsyncOpenAI, host: FunctionHost, query: str) -> None:
    conv = await client.conversations.create()
    response = await host.request("GET", f"/api/conversations/{conv.id}/items", query=query)
    assert response.status == 400
    assert (await response.json())["error"]["type"] == "invalid_request_error"


async def test_refused_requests_are_openai_errors(client: AsyncOpenAI, host: FunctionHost) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        await client.conversations.create(items=[{"role": "user", "content": "hi"}])
    assert raised.value.body["param"] == "items"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError):
        await client.conversations.create(metadata={"k": 5})  # type: ignore[dict-item]
    with pytest.raises(openai.BadRequestError):
        await client.conversations.create(extra_body={"name": "x"})
    for body in (b"[1]", b"{", b'{"metadata": {}, "metadata": {}}', b'{"items": {}}', b'{"items": "x"}', b"\n", b" "):
        response = await host.request(
            "POST", "/api/conversations", body=body, headers={"content-type": "application/json"}
        )
        assert response.status == 400, body
    with pytest.raises(openai.BadRequestError):
        await client.conversations.retrieve("a..b")


def only_alices(*, route: str, thread_id: str, headers: Mapping[str, str], metadata: Mapping[str, str]) -> bool:
    """A test authorizer: a conversation is alice's if its metadata says so."""
    return headers.get("x-caller") == "alice" and metadata.get("owner") in ("alice", None)


async def test_the_authorizer_guards_every_conversation_route(
    client: AsyncOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    conv = await client.conversations.create(metadata={"owner": "alice"})
    await _say(client, conv.id, "hello")
    monkeypatch.setenv("THREAD_AUTHORIZER", "tests.adapter.test_conversations_api:only_alices")
    bob: dict[str, Any] = {"extra_headers": {"x-caller": "bob"}}
    for call in (
        client.conversations.retrieve(conv.id, **bob),
        client.conversations.update(conv.id, metadata={"owner": "bob"}, **bob),
        client.conversations.items.list(conv.id, **bob),
        client.conversations.delete(conv.id, **bob),
        client.conversations.create(**bob),
    ):
        with pytest.raises(openai.PermissionDeniedError):
            await call
    alice: dict[str, Any] = {"extra_headers": {"x-caller": "alice"}}
    assert len((await client.conversations.items.list(conv.id, **alice)).data) == 2
    assert (await client.conversations.delete(conv.id, **alice)).deleted


async def test_deleting_a_conversation_deletes_its_thread_whole(client: AsyncOpenAI, host: FunctionHost) -> None:
    conv = await client.conversations.create(metadata={"k": "v"})
    await _say(client, conv.id, "one")
    await _say(client, conv.id, "two")
    await client.conversations.delete(conv.id)
    container = wiring.container_for(wiring.load_settings())
    left = [
        blob.name
        async for blob in container.list_blobs(include=["metadata"])
        if conv.id in blob.name or (blob.metadata or {}).get("thread_id") == conv.id
    ]
    assert left == []
    assert (await host.request("GET", f"/api/threads/{conv.id}")).status == 404
    with pytest.raises(openai.NotFoundError):
        await client.conversations.items.list(conv.id)
    # The ID starts afresh as a new thread, with none of the old messages.
    assert "turn 1" in await _say(client, conv.id, "again")
    assert len((await client.conversations.items.list(conv.id)).data) == 2


async def test_a_delete_that_runs_out_of_time_is_retryable_and_the_same_call_finishes_it(
    client: AsyncOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    conv = await client.conversations.create()
    await _say(client, conv.id, "one")
    monkeypatch.setenv("THREAD_DELETE_SECONDS", "0.000001")  # every call does one page, then stops
    with pytest.raises(openai.ConflictError) as raised:
        await client.conversations.delete(conv.id)
    assert raised.value.code == "conversation_deleting"
    assert raised.value.response.headers["x-should-retry"] == "true"
    assert raised.value.response.headers["retry-after"] == "1"
    with pytest.raises(openai.NotFoundError):  # a conversation being deleted is gone to readers
        await client.conversations.retrieve(conv.id)
    for _ in range(20):
        try:
            assert (await client.conversations.delete(conv.id)).deleted
            break
        except openai.ConflictError:
            continue
    else:
        pytest.fail("the delete never finished")
    with pytest.raises(openai.NotFoundError):
        await client.conversations.delete(conv.id)


async def test_with_the_ready_authorizer_a_caller_creates_conversations_under_its_prefix(
    client: AsyncOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("THREAD_AUTHORIZER", "functions_adapter.authorizers:thread_prefix_of_principal")
    monkeypatch.setenv("THREAD_PRINCIPAL_HEADER", "x-caller")
    alice: dict[str, Any] = {"extra_headers": {"x-caller": "alice"}}
    with pytest.raises(openai.PermissionDeniedError):
        await client.conversations.create(**alice)  # conv_...: nobody's prefix
    conv = await client.conversations.create(extra_body={"id_prefix": "alice."}, metadata={"k": "v"}, **alice)
    assert conv.id.startswith("alice.conv_") and conv.created_at > 1_700_000_000
    assert (await client.conversations.retrieve(conv.id, **alice)).created_at == conv.created_at
    with pytest.raises(openai.PermissionDeniedError):
        await client.conversations.create(extra_body={"id_prefix": "bob."}, **alice)
    with pytest.raises(openai.PermissionDeniedError):
        await client.conversations.retrieve(conv.id, extra_headers={"x-caller": "bob"})
    for bad in ("../", ".a.", "a", "a" * 70 + ".", 5):
        with pytest.raises(openai.BadRequestError) as raised:
            await client.conversations.create(extra_body={"id_prefix": bad}, **alice)
        assert raised.value.body["param"] == "id_prefix"  # type: ignore[index]


async def test_an_items_page_costs_reads_bounded_by_the_page_and_a_turn_costs_what_it_did(
    client: AsyncOpenAI, monkeypatch: pytest.MonkeyPatch, ops: OperationCounter
) -> None:
    monkeypatch.setenv("CHECKPOINT_CACHE_BYTES", "0")  # a cold instance: every turn reads its head
    conv = await client.conversations.create()
    await _say(client, "warm-up", "hi")  # the container and clients exist
    for n in range(10):
        ops.reset()
        await client.responses.create(input=f"m{n}", conversation=conv.id, store=False)
        # pointer read, head read, checkpoint write, pointer write. The first turn reads no
        # head but the conversation's metadata record (its creator owns it until a turn claims
        # it); later turns never read the metadata, and the authorizer-free gate reads nothing
        assert ops.total == 4, ops.log
    ops.reset()
    page = await client.conversations.items.list(conv.id, limit=4)
    # metadata and pointer (does the conversation exist), pointer again, then one checkpoint a turn
    # for 2 turns, and a third to know whether more follow
    assert len(page.data) == 4 and page.has_more
    assert ops.total == 2 + 1 + 3, ops.log
    ops.reset()
    page = await client.conversations.items.list(conv.id, limit=4, after=page.last_id)
    # the same, and the metadata of the item's checkpoint (whose thread it is; its parent)
    assert ops.total == 2 + 1 + 1 + 3, ops.log
    ops.reset()
    page = await client.conversations.items.list(conv.id, limit=4, order="asc")
    assert ops.total == 2 + 1 + 10 + 3, ops.log  # the lineage's metadata, then the page's turns


async def test_a_conversation_another_origin_made_is_refused_on_every_route(
    client: AsyncOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("THREAD_PRINCIPAL_HEADER", "x-caller")  # origins apart, no authorizer
    alice: dict[str, Any] = {"extra_headers": {"x-caller": "alice"}}
    bob: dict[str, Any] = {"extra_headers": {"x-caller": "bob"}}
    conv = await client.conversations.create(**alice)
    await client.responses.create(input="mine", conversation=conv.id, **alice)  # the first turn records alice
    for call in (
        client.conversations.retrieve(conv.id, **bob),
        client.conversations.update(conv.id, metadata={"x": "y"}, **bob),
        client.conversations.items.list(conv.id, **bob),
        client.conversations.delete(conv.id, **bob),
        client.conversations.retrieve(conv.id),  # a function-key caller without a principal
    ):
        with pytest.raises(openai.PermissionDeniedError):
            await call
    assert len((await client.conversations.items.list(conv.id, **alice)).data) == 2
    assert (await client.conversations.retrieve(conv.id, **alice)).metadata == {}


async def test_a_conversation_whose_head_retention_removed_is_gone_410_as_its_thread(client: AsyncOpenAI) -> None:
    conv = await client.conversations.create()
    reply = await client.responses.create(input="hello", conversation=conv.id, store=False)
    assert reply.output_text
    container = wiring.container_for(wiring.load_settings())
    head = [b.name async for b in container.list_blobs(name_starts_with="checkpoints/", include=["metadata"])]
    for name in head:  # the lifecycle rule removed the idle thread's checkpoints
        await container.delete_blob(name)
    for call in (client.conversations.retrieve(conv.id), client.conversations.items.list(conv.id)):
        with pytest.raises(openai.APIStatusError) as raised:
            await call
        assert (raised.value.status_code, raised.value.code) == (410, "thread_expired")
