"""What an attacker with write access to the checkpoint container does, for the tests."""

from __future__ import annotations

import base64
import json
import os
import uuid
from collections.abc import Callable
from typing import Any

from azure.storage.blob.aio import ContainerClient

from devtools.function_host import FunctionHost


def envelope(pickled: bytes, type_key: str = "builtins:dict") -> dict[str, str]:
    return {"__pickled__": base64.b64encode(pickled).decode(), "__type__": type_key}


def attacker_container(container: str) -> ContainerClient:
    return ContainerClient.from_connection_string(os.environ["CHECKPOINT_STORAGE"], container)


async def plant(container: str, genuine_id: str, mutate: Callable[[dict[str, Any]], None]) -> str:
    """Copy a genuine checkpoint (body and metadata), change it, upload it under a new ID."""
    async with attacker_container(container) as client:
        downloader = await client.download_blob(f"checkpoints/{genuine_id}.json")
        raw = json.loads(await downloader.readall())
        metadata = dict(downloader.properties.metadata or {})
        new_id = uuid.uuid4().hex
        raw["checkpoint_id"] = new_id
        mutate(raw)
        await client.upload_blob(f"checkpoints/{new_id}.json", json.dumps(raw).encode(), metadata=metadata)
    return new_id


async def first_turn(host: FunctionHost, text: str = "hello") -> dict[str, Any]:
    response = await host.request("POST", "/api/runs", json_body={"messages": text})
    assert response.status == 200, await response.body()
    return await response.json()


def with_state_value(value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(raw: dict[str, Any]) -> None:
        raw["state"]["injected"] = value

    return mutate


async def overwrite(container: str, blob_name: str, body: bytes) -> None:
    """Replace a blob's bytes with ``body`` (a corrupt record, say), as storage access allows."""
    async with attacker_container(container) as client:
        await client.upload_blob(blob_name, body, overwrite=True)
