"""Storage answers that are not outages: a refused credential, a bad request, an empty blob.

Only transport failures, timeouts and 5xx are 503 with Retry-After. A 401/403 or another
permanent 4xx means the app is misconfigured (500 ``server_misconfigured``, no Retry-After,
logged at error level with the storage error code); an empty or truncated checkpoint blob
is unreadable (422), never something to retry.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from azure.storage.blob.aio import BlobServiceClient

from devtools.azurite import ACCOUNT_KEY, Azurite, start_azurite
from devtools.function_host import FunctionHost
from resumable.storage import clients as storage_client


async def _put_blob(connection_string: str, container: str, name: str, data: bytes) -> None:
    async with BlobServiceClient.from_connection_string(connection_string) as client:
        container_client = client.get_container_client(container)
        if not await container_client.exists():
            await container_client.create_container()
        await container_client.upload_blob(name, data, overwrite=True)


@pytest.mark.parametrize("route", ["/api/runs", "/api/threads/t1/runs"])
async def test_a_refused_credential_is_a_misconfiguration_not_an_outage(
    host: FunctionHost, azurite: Azurite, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, route: str
) -> None:
    wrong_key = "A" * len(ACCOUNT_KEY.rstrip("=")) + "=="
    monkeypatch.setenv("CHECKPOINT_STORAGE", azurite.connection_string.replace(ACCOUNT_KEY, wrong_key))
    await storage_client.close_all()
    with caplog.at_level(logging.ERROR):
        response = await host.request("POST", route, json_body={"messages": "hello"})
    assert response.status == 500
    assert (await response.json())["error"]["code"] == "server_misconfigured"
    assert "retry-after" not in response.headers
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("403" in m and "Auth" in m for m in errors), errors


@pytest.fixture
def strict_azurite() -> Iterator[Azurite]:
    """An Azurite that refuses the SDK's API version: a permanent 400 on every call."""
    emulator = start_azurite(skip_api_version_check=False)
    yield emulator
    emulator.stop()


async def test_a_permanent_storage_400_is_a_misconfiguration(
    host: FunctionHost, strict_azurite: Azurite, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHECKPOINT_STORAGE", strict_azurite.connection_string)
    await storage_client.close_all()
    response = await host.request("POST", "/api/runs", json_body={"messages": "hello"})
    assert response.status == 500
    assert (await response.json())["error"]["code"] == "server_misconfigured"
    assert "retry-after" not in response.headers


@pytest.mark.parametrize(
    ("data", "why"),
    [(b"", "empty"), (b'{"workflow_name": "default", "graph_sig', "truncated"), (b"not json at all", "foreign")],
)
async def test_an_empty_or_truncated_checkpoint_blob_is_unreadable(
    host: FunctionHost, azurite: Azurite, storage_env: str, data: bytes, why: str
) -> None:
    await _put_blob(azurite.connection_string, storage_env, "checkpoints/broken-1.json", data)
    response = await host.request("POST", "/api/runs", json_body={"checkpoint_id": "broken-1", "messages": "hi"})
    assert response.status == 422, why
    assert (await response.json())["error"]["code"] == "checkpoint_unreadable"
    assert "retry-after" not in response.headers
