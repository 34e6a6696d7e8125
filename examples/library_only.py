"""The library without Azure Functions: start a conversation, then resume it with new input.

    CHECKPOINT_STORAGE="<connection string>" python examples/library_only.py

Uses only ``resumable`` (no HTTP, no Functions) and the default workflow.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

# Run by its path, Python puts examples/ first on sys.path, not the repository root that
# holds resumable/ and workflows/ (the repository is not an installed package): add it.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent_framework import Message
from azure.storage.blob.aio import ContainerClient

from resumable import BlobCheckpointStorage, CheckpointCodec, TurnInput, prepare_run
from workflows.default_conversation import SPEC


async def turn(store: BlobCheckpointStorage, checkpoint_id: str | None, text: str) -> str:
    """One atomic resume: load and validate, hydrate, run once with the input, save."""
    checkpoint = await store.load(checkpoint_id) if checkpoint_id else None
    run = await prepare_run(SPEC.build(), checkpoint, TurnInput(messages=[Message(role="user", contents=[text])]))
    async for event in run.events():
        if event.type == "output":
            print(f"  {event.executor_id}: {getattr(event.data, 'text', event.data)}")
    saved = await run.final_checkpoint()
    await store.save(saved)
    return saved.checkpoint_id


async def main() -> None:
    container = ContainerClient.from_connection_string(os.environ["CHECKPOINT_STORAGE"], "library-example")
    async with container:
        store = BlobCheckpointStorage(container, CheckpointCodec(allowed_types=SPEC.allowed_type_keys))
        await store.ensure_container()
        first = await turn(store, None, "hello")
        second = await turn(store, first, "and again")
        print(f"checkpoints: {first} -> {second}")


if __name__ == "__main__":
    asyncio.run(main())
