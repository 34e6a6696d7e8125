"""The unmodified ``openai`` SDK, with its automatic retries on, against the in-process app,
when storage fails in the middle of a Responses turn.

Faults are injected at the storage SDK boundary (``BlobClient.upload_blob`` and
``download_blob``): the pointer swap of a conversation turn lands, its answer is lost (a
timeout), and the reads that would tell whether it landed fail until the HTTP answer is
sent. The turn committed, but nobody can say so: an answer the SDK retries on its own
would apply the turn twice. An outage before anything could commit stays retryable, and
with an ``Idempotency-Key`` the retry is safe (it replays the committed turn).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx2
import openai
import pytest
from azure.core.exceptions import ServiceResponseError
from azure.storage.blob.aio import BlobClient
from openai import AsyncOpenAI

from devtools.function_host import FunctionHost
from devtools.local_server import asgi_app
from functions_adapter import wiring


@dataclass
class Faults:
    """What the storage SDK does to the pointer blob of ``thread`` (``threads/<id>.json``)."""

    thread: str = ""
    lose_swap_answer: bool = False  # the next pointer swap lands, then times out
    fail_save: bool = False  # the next checkpoint upload fails before it lands
    reads_fail: bool = False  # set by a lost swap answer, until the HTTP answer is sent
    sent: list[dict[str, str]] = field(default_factory=list)  # each request's headers


class _Recorded(httpx2.AsyncBaseTransport):
    """The app over ASGI; each request's headers noted, and the outage ends with each answer."""

    def __init__(self, app: Any, faults: Faults) -> None:
        self._inner = httpx2.ASGITransport(app=app)
        self._faults = faults

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self._faults.sent.append({k.lower(): v for k, v in request.headers.items()})
        try:
            return await self._inner.handle_async_request(request)
        finally:
            self._faults.reads_fail = False


@pytest.fixture
def faults(monkeypatch: pytest.MonkeyPatch) -> Iterator[Faults]:
    state = Faults()
    upload, download = BlobClient.upload_blob, BlobClient.download_blob

    async def upload_blob(self: BlobClient, data: Any, *args: Any, **kwargs: Any) -> Any:
        if state.fail_save and self.blob_name.startswith("checkpoints/"):
            state.fail_save = False
            raise ServiceResponseError("Connection reset before the upload landed")
        result = await upload(self, data, *args, **kwargs)
        if state.lose_swap_answer and self.blob_name == f"threads/{state.thread}.json":
            state.lose_swap_answer, state.reads_fail = False, True
            raise ServiceResponseError("The read operation timed out")
        return result

    async def download_blob(self: BlobClient, *args: Any, **kwargs: Any) -> Any:
        if state.reads_fail and self.blob_name == f"threads/{state.thread}.json":
            raise ServiceResponseError("The read operation timed out")
        return await download(self, *args, **kwargs)

    monkeypatch.setattr(BlobClient, "upload_blob", upload_blob)
    monkeypatch.setattr(BlobClient, "download_blob", download_blob)
    yield state


@pytest.fixture
async def client(host: FunctionHost, faults: Faults) -> AsyncIterator[AsyncOpenAI]:
    transport = _Recorded(asgi_app(host), faults)
    http = httpx2.AsyncClient(transport=transport, base_url="http://app")
    sdk = AsyncOpenAI(base_url="http://app/api", api_key="local", http_client=http)  # default retries
    yield sdk
    await http.aclose()


async def turns(host: FunctionHost, thread_id: str) -> int:
    found = await host.request("GET", f"/api/threads/{thread_id}")
    return int((await found.json())["turns"])


async def test_an_unknown_outcome_is_never_retried_blindly(
    host: FunctionHost, client: AsyncOpenAI, faults: Faults
) -> None:
    faults.thread = conversation = f"acct-{uuid.uuid4().hex[:8]}"
    await client.responses.create(input="open the account", conversation=conversation)
    faults.lose_swap_answer, faults.sent[:] = True, []
    with pytest.raises(openai.APIStatusError) as unknown:
        await client.responses.create(input="transfer 100", conversation=conversation)
    # One request: the SDK was told not to retry, and it did not.
    assert [h.get("x-stainless-retry-count") for h in faults.sent] == ["0"]
    answer = unknown.value
    assert answer.status_code == 500 and answer.response.headers["x-should-retry"] == "false"
    assert "retry-after" not in answer.response.headers
    body: dict[str, Any] = answer.body  # type: ignore[assignment]
    assert body["code"] == "outcome_unknown" and body["type"] == "server_error"
    assert body["details"]["conversation"] == conversation and body["details"]["id"].startswith("resp_")
    # The turn did commit, once: the client resolves it from the conversation.
    assert await turns(host, conversation) == 2
    # And by retrieving the response the error named: it committed.
    retrieved = await client.responses.retrieve(body["details"]["id"])
    assert retrieved.status == "completed" and retrieved.output_text.startswith("turn 2")


async def test_an_outage_before_the_commit_is_retried_and_applies_once(
    host: FunctionHost, client: AsyncOpenAI, faults: Faults
) -> None:
    faults.thread = conversation = f"acct-{uuid.uuid4().hex[:8]}"
    await client.responses.create(input="open the account", conversation=conversation)
    faults.fail_save, faults.sent[:] = True, []
    done = await client.responses.create(input="transfer 100", conversation=conversation)
    assert [h.get("x-stainless-retry-count") for h in faults.sent] == ["0", "1"]  # retried once
    assert done.output_text.startswith("turn 2") and await turns(host, conversation) == 2


async def test_with_an_idempotency_key_the_sdk_retry_replays_the_committed_turn(
    host: FunctionHost, client: AsyncOpenAI, faults: Faults
) -> None:
    faults.thread = conversation = f"acct-{uuid.uuid4().hex[:8]}"
    await client.responses.create(input="open the account", conversation=conversation)
    faults.lose_swap_answer, faults.sent[:] = True, []
    key = {"Idempotency-Key": uuid.uuid4().hex}
    done = await client.responses.create(input="transfer 100", conversation=conversation, extra_headers=key)
    assert [h.get("x-stainless-retry-count") for h in faults.sent] == ["0", "1"]
    assert done.output_text.startswith("turn 2") and await turns(host, conversation) == 2
    again = await client.responses.create(input="transfer 100", conversation=conversation, extra_headers=key)
    assert json.loads(again.model_dump_json()) == json.loads(done.model_dump_json())
    assert await turns(host, conversation) == 2


async def test_a_delete_right_after_the_commit_leaves_no_response_behind(
    host: FunctionHost, client: AsyncOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The thread is deleted in the window after the turn's pointer swap landed and before
    its answer: nothing of the turn may be readable afterwards, the response included."""
    conversation = f"erase-{uuid.uuid4().hex[:8]}"
    await client.responses.create(input="first", conversation=conversation)
    swapped = BlobClient.upload_blob
    deleted: list[int] = []

    async def delete_after_swap(self: BlobClient, data: Any, *args: Any, **kwargs: Any) -> Any:
        result = await swapped(self, data, *args, **kwargs)
        if self.blob_name == f"threads/{conversation}.json" and not deleted:
            deleted.append(0)  # the delete's own pointer writes pass straight through
            deleted[0] = (await host.request("DELETE", f"/api/threads/{conversation}")).status
        return result

    monkeypatch.setattr(BlobClient, "upload_blob", delete_after_swap)
    second = await client.responses.create(input="my secret", conversation=conversation)
    assert deleted == [204] and second.output_text.startswith("turn 2")
    for call in (lambda: client.responses.retrieve(second.id), lambda: client.responses.input_items.list(second.id)):
        with pytest.raises(openai.NotFoundError):
            await call()
    assert (await host.request("GET", f"/api/threads/{conversation}")).status == 404


async def test_a_stream_ends_with_outcome_unknown_too(host: FunctionHost, client: AsyncOpenAI, faults: Faults) -> None:
    faults.thread = conversation = f"acct-{uuid.uuid4().hex[:8]}"
    await client.responses.create(input="open the account", conversation=conversation)
    faults.lose_swap_answer = True
    events = [e async for e in await client.responses.create(input="transfer", conversation=conversation, stream=True)]
    final = events[-1]
    assert final.type == "response.failed" and final.response.error is not None
    assert final.response.error.code == "outcome_unknown"
    assert await turns(host, conversation) == 2
    assert (await client.responses.retrieve(final.response.id)).status == "completed"


async def test_a_delete_just_before_the_commit_leaves_no_response_behind(
    host: FunctionHost, client: AsyncOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The thread is deleted after the turn wrote its response record and before its
    pointer swap: the swap fails on the delete's fence, and the record goes too."""
    conversation = f"erase-{uuid.uuid4().hex[:8]}"
    await client.responses.create(input="first", conversation=conversation)
    swap = BlobClient.upload_blob
    deleted: list[int] = []

    async def delete_before_swap(self: BlobClient, data: Any, *args: Any, **kwargs: Any) -> Any:
        if self.blob_name == f"threads/{conversation}.json" and not deleted:
            deleted.append(0)
            deleted[0] = (await host.request("DELETE", f"/api/threads/{conversation}")).status
        return await swap(self, data, *args, **kwargs)

    monkeypatch.setattr(BlobClient, "upload_blob", delete_before_swap)
    with pytest.raises(openai.ConflictError) as lost:
        await client.with_options(max_retries=0).responses.create(input="my secret", conversation=conversation)
    assert deleted == [204] and lost.value.body["code"] == "thread_busy"  # type: ignore[index]
    container = wiring.container_for(wiring.load_settings())
    left = [blob.name async for blob in container.list_blobs()]
    assert left == [], left  # no record, no checkpoint, no pointer: nothing of the thread


async def test_what_a_stored_conversation_turn_writes(host: FunctionHost, ops: Any) -> None:
    """The record before the commit, the checkpoint, the pointer swap, the record settled:
    four writes on a warm instance (the record after the commit alone was three)."""
    await host.request("POST", "/api/responses", json_body={"input": "a", "conversation": "costed"})
    ops.reset()
    turn = await host.request("POST", "/api/responses", json_body={"input": "b", "conversation": "costed"})
    assert turn.status == 200
    assert [(method, url.rsplit("/", 2)[-2]) for method, url in ops.log] == [
        ("PUT", "runs"),
        ("PUT", "checkpoints"),
        ("PUT", "threads"),
        ("PUT", "runs"),
    ]


async def test_an_unstored_conversation_turn_writes_what_a_thread_turn_writes(host: FunctionHost, ops: Any) -> None:
    """``store: false`` keeps no record: a warm turn is the thread route's floor, the
    checkpoint then the pointer's swap (docs/performance.md: what each extra write buys)."""
    body = {"input": "a", "conversation": "uncosted", "store": False}
    await host.request("POST", "/api/responses", json_body=body)
    ops.reset()
    turn = await host.request("POST", "/api/responses", json_body={**body, "input": "b"})
    assert turn.status == 200
    assert [(method, url.rsplit("/", 2)[-2]) for method, url in ops.log] == [("PUT", "checkpoints"), ("PUT", "threads")]


async def test_an_idempotency_key_is_honoured_whatever_idempotency_headers_says(
    client: AsyncOpenAI, monkeypatch: pytest.MonkeyPatch, host: FunctionHost
) -> None:
    monkeypatch.setenv("IDEMPOTENCY_HEADERS", "X-GitHub-Delivery")
    key = {"Idempotency-Key": uuid.uuid4().hex}
    first = await client.responses.create(input="once", conversation="keyed", extra_headers=key)
    again = await client.responses.create(input="once", conversation="keyed", extra_headers=key)
    assert again.id == first.id and await turns(host, "keyed") == 1
