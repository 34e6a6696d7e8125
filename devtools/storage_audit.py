"""Reading a drill's outcome from storage alone: a thread's lineage, and what is left stuck.

The fault matrix and the two-instance tests (``tests/matrix_support.py``) and the scale-out
drill (``bench/scale_out_verify.py``) judge the same promises the same way, so the reads live
here once. Everything reads the app's own container (``CHECKPOINT_STORAGE``,
``CHECKPOINT_CONTAINER``), as another instance of the app would see it.
"""

from __future__ import annotations

import json
from typing import Any

from azure.core.exceptions import ResourceNotFoundError

from functions_adapter import wiring
from resumable.storage import layout

TERMINAL_RUNS = {"succeeded", "failed", "cancelled"}
HELD_CLAIMS = {"in_progress", "committing"}


def container() -> Any:
    return wiring.container_for(wiring.load_settings())


async def blob_names(prefix: str) -> list[str]:
    try:
        return [b.name async for b in container().list_blobs(name_starts_with=prefix)]
    except ResourceNotFoundError:
        return []


async def read_json(name: str) -> Any:
    try:
        return json.loads(await (await container().get_blob_client(name).download_blob()).readall())
    except ResourceNotFoundError:
        return None


def user_texts(data: Any) -> list[str] | None:
    """The default workflow's memory: every user text of the lineage, in order."""
    if isinstance(data, dict):
        if "user_texts" in data and isinstance(data["user_texts"], list):
            return [str(t) for t in data["user_texts"]]
        values = data.values()
    elif isinstance(data, list):
        values = data
    else:
        return None
    for value in values:
        found = user_texts(value)
        if found is not None:
            return found
    return None


async def lineage(thread: str) -> tuple[list[str], list[str]]:
    """The thread's checkpoints (head first) and the head's user texts, from storage. A
    checkpoint the walk cannot find ends the chain and is its last element."""
    pointer = await read_json(layout.record_blob(layout.THREADS, thread))
    head = None if pointer is None else pointer.get("checkpoint_id")
    if head is None:
        return [], []
    texts = user_texts(await read_json(layout.record_blob(layout.CHECKPOINTS, head))) or []
    chain: list[str] = []
    cursor: str | None = head
    while cursor:
        chain.append(cursor)
        blob = container().get_blob_client(layout.record_blob(layout.CHECKPOINTS, cursor))
        try:
            cursor = (await blob.get_blob_properties()).metadata.get("previous_checkpoint_id")
        except ResourceNotFoundError:
            break
    return chain, texts


async def stuck_records() -> list[str]:
    """Every record left non-final once requests and queue are done."""
    stuck: list[str] = []
    for name in await blob_names(layout.RUNS):
        record = await read_json(name) if name.endswith(".json") else None
        if record is not None and record.get("status") not in TERMINAL_RUNS:
            stuck.append(f"{name}: run {record.get('status')}")
    for name in await blob_names(layout.RUN_ORDER):
        if (record := await read_json(name)) is not None and record.get("pending"):
            stuck.append(f"{name}: pending {[entry[0] for entry in record['pending']]}")
    for name in await blob_names(layout.IDEMPOTENCY):
        if (record := await read_json(name)) is not None and record.get("state") in HELD_CLAIMS:
            stuck.append(f"{name}: claim {record['state']}")
    for name in await blob_names(layout.CALLBACKS):
        if (record := await read_json(name)) is not None and record.get("outcome") == "pending":
            stuck.append(f"{name}: callback pending")
    return stuck


__all__ = [
    "HELD_CLAIMS",
    "TERMINAL_RUNS",
    "blob_names",
    "container",
    "lineage",
    "read_json",
    "stuck_records",
    "user_texts",
]
