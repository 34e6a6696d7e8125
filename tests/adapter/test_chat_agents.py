"""WORKFLOW=chat-agents against a fake OpenAI endpoint on loopback: the real client, no network."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import ClassVar

import pytest

from devtools.fake_openai import FakeOpenAI, start_fake_openai
from devtools.function_host import FunctionHost
from devtools.op_counter import OperationCounter
from functions_adapter import wiring as composition
from functions_adapter.settings import Settings
from workflows import chat_agents

API_KEY = "sk-test-never-in-a-checkpoint"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def model(host: FunctionHost, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeOpenAI]:
    server = await start_fake_openai()
    monkeypatch.setenv("WORKFLOW", "chat-agents")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.setenv("OPENAI_MODEL", "fake-model")
    composition.workflow_spec.cache_clear()
    chat_agents._clients.clear()
    yield server
    await chat_agents.close_clients()
    composition.workflow_spec.cache_clear()
    await server.close()


async def thread_turn(host: FunctionHost, text: str, **extra) -> dict:
    response = await host.request("POST", "/api/threads/chat/runs", json_body={"messages": text, **extra})
    assert response.status == 200, await response.body()
    return await response.json()


async def test_turn_two_sees_turn_one_after_a_checkpoint_round_trip(
    host: FunctionHost, model: FakeOpenAI, ops: OperationCounter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHECKPOINT_CACHE_BYTES", "0")  # a cold instance: turn two reads what turn one stored
    first = await thread_turn(host, "My name is Ada.")
    assert first["messages"] == [{"role": "assistant", "content": "reviewer: reply; user said: My name is Ada."}]
    ops.reset()
    second = await thread_turn(host, "What is my name?")
    writer_turn_two = model.requests[2]
    assert writer_turn_two["messages"][0]["content"].startswith("writer:")
    seen = [m["content"] for m in writer_turn_two["messages"] if m["role"] in ("user", "assistant")]
    assert seen[0] == "My name is Ada."  # restored from the checkpoint, not resent by the caller
    assert "My name is Ada. | What is my name?" in second["messages"][0]["content"]
    assert second["previous_checkpoint_id"] == first["checkpoint_id"]
    # A resume still costs one blob read and one write (plus the thread pointer's read and swap).
    assert ops.counts["PUT"] == 2
    assert ops.counts["GET"] == 2


async def test_the_api_key_never_reaches_a_checkpoint(host: FunctionHost, model: FakeOpenAI) -> None:
    body = await thread_turn(host, "hello")
    store = composition.build_service(Settings.from_env()).store
    raw = await (await store.container.download_blob(f"checkpoints/{body['checkpoint_id']}.json")).readall()
    assert API_KEY.encode() not in raw


async def test_streamed_tokens_arrive_as_sse_while_the_model_is_still_streaming(
    host: FunctionHost, model: FakeOpenAI
) -> None:
    await thread_turn(host, "first turn")
    model.hold_role = "reviewer"
    response = await host.request(
        "POST", "/api/threads/chat/runs", json_body={"messages": "second turn"}, headers={"Accept": "text/event-stream"}
    )
    events = response.events()
    name, data = await anext(events)
    # The fake model is holding the rest of the reply, so this delta was sent mid-stream.
    assert not model.release.is_set()
    assert (name, data) == ("output", {"executor_id": "reviewer", "delta": "reviewer:"})
    model.release.set()
    rest = [e async for e in events]
    deltas = [data["delta"] for name, data in rest if name == "output"]
    name, done = rest[-1]
    assert name == "done"
    assert done["messages"] == [{"role": "assistant", "content": "reviewer:" + "".join(deltas)}]
    assert "first turn | second turn" in done["messages"][0]["content"]


async def test_missing_model_settings_are_a_clear_500(host: FunctionHost, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKFLOW", "chat-agents")
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL", "AZURE_OPENAI_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    composition.workflow_spec.cache_clear()
    response = await host.request("POST", "/api/runs", json_body={"messages": "hi"})
    composition.workflow_spec.cache_clear()
    assert (response.status, (await response.json())["error"]["code"]) == (500, "server_misconfigured")


async def test_chat_agents_without_its_packages_is_a_500_that_names_the_lock(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The default requirements.txt leaves the model client out; selecting chat-agents on it
    must say what to deploy, not fail with an import error deep in a request."""
    monkeypatch.setitem(sys.modules, "agent_framework_openai", None)  # as if not installed
    monkeypatch.setenv("WORKFLOW", "chat-agents")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.setenv("OPENAI_MODEL", "fake-model")
    composition.workflow_spec.cache_clear()
    chat_agents._clients.clear()
    try:
        response = await host.request("POST", "/api/runs", json_body={"messages": "hi"})
    finally:
        composition.workflow_spec.cache_clear()
    body = await response.json()
    assert (response.status, body["error"]["code"]) == (500, "server_misconfigured")
    assert "requirements-chat-agents.txt" not in str(body)  # the reason stays in the logs
    assert any("deploy requirements-chat-agents.txt" in r.getMessage() for r in caplog.records)


class StaticTokenCredential:
    """Stands in for DefaultAzureCredential: no identity endpoint is reachable here. It
    hands out a fixed token and records being closed; everything past it is the real client."""

    instances: ClassVar[list[StaticTokenCredential]] = []

    def __init__(self, *args, **kwargs) -> None:
        self.scopes: list[tuple[str, ...]] = []
        self.closed = False
        StaticTokenCredential.instances.append(self)

    async def get_token(self, *scopes: str, **kwargs):
        from azure.core.credentials import AccessToken

        self.scopes.append(scopes)
        return AccessToken("entra-test-token", 4_102_444_800)

    async def get_token_info(self, *scopes: str, options=None):
        from azure.core.credentials import AccessTokenInfo

        self.scopes.append(scopes)
        return AccessTokenInfo("entra-test-token", 4_102_444_800)

    async def close(self) -> None:
        self.closed = True

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()


async def test_azure_openai_sends_an_entra_id_bearer_token_and_no_key(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    from azure.identity import aio as identity

    server = await start_fake_openai()
    StaticTokenCredential.instances.clear()
    monkeypatch.setattr(identity, "DefaultAzureCredential", StaticTokenCredential)
    monkeypatch.setenv("WORKFLOW", "chat-agents")
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", f"http://127.0.0.1:{server.port}")
    monkeypatch.setenv("AZURE_OPENAI_DEPLOYMENT", "gpt-4o-mini")
    monkeypatch.setenv("AZURE_OPENAI_API_VERSION", "2024-10-21")
    composition.workflow_spec.cache_clear()
    try:
        await thread_turn(host, "hello over entra")
    finally:
        await chat_agents.close_clients()
        composition.workflow_spec.cache_clear()
        await server.close()
    assert len(server.headers) == 2  # writer and reviewer
    for headers in server.headers:
        assert headers["authorization"] == "Bearer entra-test-token"
        assert "api-key" not in headers
    [credential] = StaticTokenCredential.instances
    assert credential.scopes and all(s == ("https://cognitiveservices.azure.com/.default",) for s in credential.scopes)
    assert credential.closed


def test_importing_the_app_loads_no_model_or_telemetry_client() -> None:
    code = (
        "import sys, function_app; "
        "print(sorted(m for m in ('openai', 'agent_framework_openai', 'azure.identity', 'azure.monitor.opentelemetry')"
        " if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
