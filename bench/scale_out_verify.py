"""The scale-out drill's judge: what storage holds once the drill is over, read with the SDK.

It reads the app's container (``CHECKPOINT_STORAGE``/``CHECKPOINT_CONTAINER``) through
``devtools.storage_audit``, the same reads the fault matrix and the two-instance tests audit
with, and requires:

* every surviving thread's head holds exactly its turns' texts, in order, each once (the
  default workflow keeps every user text in its state);
* its lineage, walked back from the pointer, is one checkpoint per turn, none missing, each
  recording (in its transcript) the turn it committed, oldest first, ending at a root; the
  pointer counts as many turns;
* no run record left queued or running, no pending-list entry, no idempotency claim held, no
  callback pending (``stuck_records``);
* nothing of a deleted thread: every blob in the container is listed with its metadata and
  read whole, and none may name the thread (its ID is in every turn's text).

The only input besides storage is the plan: which threads exist and which were deleted.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from devtools.storage_audit import container, lineage, read_json, stuck_records
from resumable.storage import layout

T = TypeVar("T")


@dataclass
class Verdict:
    violations: list[str] = field(default_factory=list)
    threads: int = 0  # surviving threads checked
    turns: int = 0  # turns found committed in them
    blobs: int = 0  # blobs scanned for deleted threads
    orphans: int = 0  # thread checkpoints no lineage reaches (lost races' leftovers: the sweep's)


async def _bounded(items: Iterable[T], work: Callable[[T], Awaitable[None]], limit: int) -> None:
    gate = asyncio.Semaphore(limit)

    async def one(item: T) -> None:
        async with gate:
            await work(item)

    await asyncio.gather(*(one(i) for i in items))


def _sent(checkpoint: dict[str, Any]) -> list[str]:
    """What a turn's checkpoint says it was sent (its transcript)."""
    record = (checkpoint.get("metadata") or {}).get("transcript") or {}
    return [str(m.get("content")) for m in record.get("in") or [] if isinstance(m, dict)]


async def check_thread(thread: str, expected: list[str]) -> tuple[list[str], list[str]]:
    """(violations, the thread's lineage) for one surviving thread."""
    broken: list[str] = []
    chain, texts = await lineage(thread)
    if texts != expected:
        lost = [t for t in expected if t not in texts]
        doubled = sorted({t for t in texts if texts.count(t) > 1})
        broken.append(f"{thread}: history {texts} is not {expected} (lost {lost}, doubled {doubled})")
    if len(chain) != len(expected):
        broken.append(f"{thread}: lineage has {len(chain)} checkpoints for {len(expected)} turns")
    sent: list[list[str]] = []
    for checkpoint_id in chain:
        checkpoint = await read_json(layout.record_blob(layout.CHECKPOINTS, checkpoint_id))
        if checkpoint is None:
            broken.append(f"{thread}: checkpoint {checkpoint_id} of its lineage is missing")
            continue
        sent.append(_sent(checkpoint))
        if checkpoint.get("previous_checkpoint_id") is None and checkpoint_id != chain[-1]:
            broken.append(f"{thread}: {checkpoint_id} is a root in the middle of its lineage")
    by_turn = [s for turn in reversed(sent) for s in turn]
    if not broken and by_turn != expected:
        broken.append(f"{thread}: its checkpoints record the turns {by_turn}, not {expected}")
    pointer = await read_json(layout.record_blob(layout.THREADS, thread)) or {}
    if pointer.get("turns") != len(expected) or pointer.get("deleting"):
        broken.append(f"{thread}: pointer says {pointer.get('turns')} turns, deleting={pointer.get('deleting')}")
    return broken, chain


async def scan_for(deleted: list[str], reached: set[str], verdict: Verdict, limit: int) -> None:
    """Read every blob: a deleted thread's ID in a name, metadata or body is a violation.
    Counts thread checkpoints outside every surviving lineage (``orphans``) on the way."""
    pattern = re.compile("|".join(re.escape(t) for t in deleted)) if deleted else None
    blobs = [b async for b in container().list_blobs(include=["metadata"])]
    verdict.blobs = len(blobs)

    async def one(blob: Any) -> None:
        metadata = blob.metadata or {}
        name = blob.name
        checkpoint_id = name[len(layout.CHECKPOINTS) : -len(".json")]
        if name.startswith(layout.CHECKPOINTS) and metadata.get("thread_id") and checkpoint_id not in reached:
            verdict.orphans += 1
        if pattern is None:
            return
        body = await (await container().get_blob_client(name).download_blob()).readall()
        places = [("name", name), *((f"metadata {k}", str(v)) for k, v in metadata.items())]
        places.append(("body", body.decode("utf-8", errors="replace")))
        for label, value in places:
            if match := pattern.search(value):
                verdict.violations.append(f"left of deleted {match.group(0)}: {name} ({label})")

    await _bounded(blobs, one, limit)


async def verify(expected: dict[str, list[str]], deleted: list[str], *, limit: int = 32) -> Verdict:
    """Judge the container against the plan: ``expected`` texts per surviving thread."""
    verdict = Verdict(threads=len(expected))
    reached: set[str] = set()

    async def thread(item: tuple[str, list[str]]) -> None:
        broken, chain = await check_thread(*item)
        verdict.violations.extend(broken)
        verdict.turns += len(chain)
        reached.update(chain)

    await _bounded(sorted(expected.items()), thread, limit)
    verdict.violations += [f"stuck: {line}" for line in await stuck_records()]
    await scan_for(deleted, reached, verdict, limit)
    return verdict


__all__ = ["Verdict", "check_thread", "verify"]
