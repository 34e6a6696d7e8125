"""WORKFLOW=chat-agents against a fake OpenAI endpoint on loopback: the real client, no network."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from devtools.fake_openai import FakeOpenAI, start_fake_openai
from devtools.function_host import FunctionHost
from devtools.op_counter import OperationCounter
from resumable import composition
from resumable.settings import ModelSettings, Settings
from workflows import chat_agents

API_KEY = "sk-test-never-in-a-checkpoint"
ROOT = Path(__file__).resolve().parent.parent


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
    chat_agents._clients.clear()
    composition.workflow_spec.cache_clear()
    await server.close()


async def thread_turn(host: FunctionHost, text: str, **extra) -> dict:
    response = await host.request("POST", "/api/threads/chat/runs", json_body={"messages": text, **extra})
    assert response.status == 200, await response.body()
    return await response.json()


async def test_turn_two_sees_turn_one_after_a_checkpoint_round_trip(
    host: FunctionHost, model: FakeOpenAI, ops: OperationCounter
) -> None:
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


async def test_azure_openai_uses_entra_id_up_to_the_network_boundary() -> None:
    settings = ModelSettings.from_env(
        {"AZURE_OPENAI_ENDPOINT": "https://example.openai.azure.com", "AZURE_OPENAI_DEPLOYMENT": "gpt-4o-mini"}
    )
    assert settings.provider == "azure-openai"
    client = chat_agents.chat_client(settings)
    try:
        sdk = client.client
        assert type(sdk).__name__ == "AsyncAzureOpenAI"
        assert str(sdk.base_url).startswith("https://example.openai.azure.com/openai/deployments/gpt-4o-mini")
        # Entra ID: a bearer-token provider, and no key at all.
        assert callable(sdk._azure_ad_token_provider)
        assert sdk.api_key == "<missing API key>"
        assert client.model == "gpt-4o-mini"
    finally:
        chat_agents._clients.clear()


def test_importing_the_app_loads_no_model_or_telemetry_client() -> None:
    code = (
        "import sys, function_app; "
        "print(sorted(m for m in ('openai', 'agent_framework_openai', 'azure.identity', 'azure.monitor.opentelemetry')"
        " if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
