"""What the fault matrix and the two-instance tests share: the client, the scenarios' steps,
and the audit that judges a cell from storage alone.

A ``Client`` drives the registered functions in-process (``FunctionHost``) as one app
instance, or as another one (``devtools.instances.Instance``: its own caches and turn locks,
the same storage). It remembers what each answer told the client: the audit then requires

* no lost turn: every turn the client was told succeeded is in its thread's lineage, and its
  checkpoint is one of the lineage's;
* no doubled turn: each input appears once in the head's history (the default workflow
  keeps every user text in its state);
* no stuck record: every run terminal, no pending-list entry left, no idempotency claim
  held, no callback pending, once the requests and the queue are done;
* after a DELETE that answered 204: nothing of the thread left.
"""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from azure.core.exceptions import ResourceNotFoundError

from devtools.function_host import FunctionHost
from devtools.instances import Instance
from devtools.queue_runner import QueueRunner
from devtools.storage_audit import blob_names, container, lineage, read_json, stuck_records
from resumable.storage import layout

ASYNC = {"Prefer": "respond-async"}


@dataclass
class Told:
    """A success the client was told of: its input, and the checkpoint it was given."""

    text: str
    checkpoint_id: str | None


@dataclass
class Client:
    host: FunctionHost
    thread: str = field(default_factory=lambda: f"t-{uuid.uuid4().hex[:10]}")
    told: list[Told] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # inputs answered "not applied" (409 thread_busy)
    sent: list[str] = field(default_factory=list)
    answers: list[tuple[str, int]] = field(default_factory=list)
    run_ids: set[str] = field(default_factory=set)
    accepted: dict[str, str] = field(default_factory=dict)  # run told 202 → its input
    finished: dict[str, str] = field(default_factory=dict)  # run → its final status
    deleted: bool = False
    problems: list[str] = field(default_factory=list)  # what a scenario saw go wrong
    # metadata another instance wrote after this client's write landed (last writer wins)
    later_metadata: list[dict[str, str]] = field(default_factory=list)

    @contextlib.contextmanager
    def on(self, instance: Instance | None) -> Iterator[None]:
        with instance.active() if instance is not None else contextlib.nullcontext():
            yield

    async def turn(
        self, text: str, *, key: str | None = None, instance: Instance | None = None, **body: Any
    ) -> tuple[int, Any]:
        """A synchronous thread turn; a 200 is remembered as told."""
        self.sent.append(text)
        headers = {"Idempotency-Key": key} if key else {}
        with self.on(instance):
            response = await self.host.request(
                "POST", f"/api/threads/{self.thread}/runs", json_body={"messages": text, **body}, headers=headers
            )
            answer = await response.json()
        self.answers.append((text, response.status))
        if response.status == 200:
            self.told.append(Told(text, answer["checkpoint_id"]))
        elif response.status == 409 and answer["error"]["code"] == "thread_busy":
            self.refused.append(text)
        return response.status, answer

    async def keyed_turn(self, text: str, *, tries: int = 3, instance: Instance | None = None) -> int:
        """A keyed turn, retried with the same key (as a client does) until it gets a 200."""
        key = f"k-{uuid.uuid4().hex}"
        status = 0
        for _ in range(tries):
            status, _ = await self.turn(text, key=key, instance=instance)
            if status == 200 or (400 <= status < 500 and status != 409):
                break
        return status

    async def accept(self, text: str, *, tries: int = 3, **body: Any) -> int:
        """A keyed background turn, its accept retried with the same key until a 202."""
        key = f"k-{uuid.uuid4().hex}"
        self.sent.append(text)
        status = 0
        for _ in range(tries):
            response = await self.host.request(
                "POST",
                f"/api/threads/{self.thread}/runs",
                json_body={"messages": text, **body},
                headers={**ASYNC, "Idempotency-Key": key},
            )
            status = response.status
            self.answers.append((text, status))
            if status == 202:
                run_id = (await response.json())["run_id"]
                self.run_ids.add(run_id)
                self.accepted[run_id] = text
                break
        return status

    async def settle_runs(self, runner: QueueRunner) -> None:
        """Drain the queue, then read each accepted run: a succeeded one is a told turn."""
        await drain(runner)
        for run_id in sorted(self.run_ids):
            response = await self.host.request("GET", f"/api/runs/{run_id}")
            if response.status != 200:
                continue
            run = await response.json()
            self.finished[run_id] = run["status"]
            if run["status"] == "succeeded" and run_id in self.accepted:
                self.told.append(Told(self.accepted[run_id], run.get("checkpoint_id")))

    async def delete(self, *, tries: int = 3) -> int:
        """DELETE, retried after a failure; a 404 after a failed attempt means an earlier
        attempt landed (the thread is gone): the client counts it as done, 204."""
        status = 0
        for attempt in range(tries):
            status = (await self.host.request("DELETE", f"/api/threads/{self.thread}")).status
            self.answers.append(("DELETE", status))
            if status == 404 and attempt > 0:
                status = 204
            if status in (204, 404):
                break
        self.deleted = status == 204
        return status

    async def put_metadata(self, values: dict[str, str], *, tries: int = 2) -> int:
        status = 0
        for _ in range(tries):
            response = await self.host.request("PUT", f"/api/threads/{self.thread}/metadata", json_body=values)
            status = response.status
            self.answers.append(("metadata", status))
            if status < 500:  # a client retries an outage, never a 4xx
                break
        return status


async def drain(runner: QueueRunner, rounds: int = 3) -> None:
    """Run the queue until idle; failed deliveries come back at once (visibility 0)."""
    runner.options = dataclasses.replace(runner.options, visibility_timeout=0.0)
    for _ in range(rounds):
        if not await runner.run_until_idle(timeout=60):
            break


# -- reading storage: devtools.storage_audit (shared with bench/scale_out_verify.py) ----------


async def leftovers(client: Client) -> list[str]:
    """What of a deleted thread is still in storage."""
    thread = client.thread
    left = [
        name
        for prefix in (layout.THREADS, layout.THREAD_METADATA, layout.RUN_ORDER)
        for name in await blob_names(layout.record_blob(prefix, thread))
    ]
    for run_id in client.run_ids:
        left += await blob_names(layout.record_blob(layout.RUNS, run_id))
        left += await blob_names(layout.run_events_prefix(run_id))
        left += await blob_names(layout.record_blob(layout.CALLBACKS, run_id))
    with contextlib.suppress(ResourceNotFoundError):
        async for blob in container().list_blobs(name_starts_with=layout.CHECKPOINTS, include=["metadata"]):
            if (blob.metadata or {}).get("thread_id") == thread:
                left.append(blob.name)
    return left


async def audit(client: Client) -> list[str]:
    """Every broken promise the storage shows, as readable lines (empty: the cell holds)."""
    broken: list[str] = list(client.problems)
    if client.deleted:
        broken += [f"left after DELETE 204: {name}" for name in await leftovers(client)]
    else:
        chain, texts = await lineage(client.thread)
        for told in client.told:
            if told.text not in texts:
                broken.append(f"lost turn: {told.text!r} was answered as a success, history is {texts}")
            if told.checkpoint_id is not None and told.checkpoint_id not in chain:
                broken.append(f"lost turn: {told.text!r}'s checkpoint is not in the lineage")
        told = {t.text for t in client.told}
        broken += [f"answered 'not applied' but applied: {t!r}" for t in client.refused if t in texts and t not in told]
        doubled = sorted({t for t in texts if texts.count(t) > 1})
        broken += [f"doubled turn: {t!r} is {texts.count(t)} times in the history" for t in doubled]
    for run_id in client.accepted:
        if not client.deleted and client.finished.get(run_id) != "succeeded":
            broken.append(f"accepted (202) run never ran: {run_id} is {client.finished.get(run_id)}")
    for run_id in sorted(client.run_ids):  # a finished run keeps no progress checkpoint
        if client.finished.get(run_id) in ("succeeded", "failed", "cancelled"):
            left = await blob_names(layout.run_events_prefix(run_id) + "progress-")
            broken += [f"progress left after its run ended: {name}" for name in left]
    broken += [f"stuck: {line}" for line in await stuck_records()]
    return broken


__all__ = [
    "ASYNC",
    "Client",
    "Told",
    "audit",
    "blob_names",
    "drain",
    "leftovers",
    "lineage",
    "read_json",
    "stuck_records",
]
