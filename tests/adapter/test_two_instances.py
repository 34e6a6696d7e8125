"""Every thread operation racing its twin on a second app instance, on one Azurite.

The two instances are ``devtools.instances.Instance``s: the same registered functions, each
with its own caches and turn locks, so nothing in-process serializes them and only storage
decides, as between two workers. Each race runs the operation on both at once (a few rounds
on fresh threads), then judges storage with the fault matrix's audit: no lost turn, no
doubled turn, no stuck record, nothing left of a deleted thread.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from devtools.function_host import FunctionHost
from devtools.instances import Instance, separate_instances
from devtools.queue_runner import QueueRunner
from tests.matrix_support import ASYNC, Client, audit, drain

ROUNDS = 3


@dataclass
class Pair:
    host: FunctionHost
    a: Instance
    b: Instance
    runner: QueueRunner

    async def race(self, op: Callable[[str], Awaitable[Any]]) -> list[Any]:
        """``op`` on both instances at once (called with "a" or "b"); their answers, in order."""

        async def on(instance: Instance, name: str) -> Any:
            with instance.active():
                return await op(name)

        return list(await asyncio.gather(on(self.a, "a"), on(self.b, "b")))

    async def rounds(self, one: Callable[[Pair, Client], Awaitable[None]]) -> None:
        for _ in range(ROUNDS):
            await one(self, Client(self.host))


@pytest.fixture
async def pair(host: FunctionHost, queue_env: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Pair]:
    with separate_instances(monkeypatch):
        yield Pair(host, Instance(), Instance(), QueueRunner(host))


@pytest.mark.parametrize("multitask", ["reject", "enqueue"])
async def test_two_turns_at_once(pair: Pair, multitask: str) -> None:
    """``enqueue``: both apply, once each. ``reject`` (the default): at least one applies, and
    a 409 ``thread_busy`` ("not applied") is true: its input is not in the history."""

    async def one(pair: Pair, client: Client) -> None:
        await client.turn("seed")
        answers = await pair.race(lambda name: client.turn(f"turn-{name}", multitask=multitask))
        statuses = sorted(status for status, _ in answers)
        assert statuses in ([[200, 200]] if multitask == "enqueue" else [[200, 200], [200, 409]]), answers
        assert not await audit(client)

    await pair.rounds(one)


async def test_two_keyed_turns_with_one_key_run_once(pair: Pair) -> None:
    async def one(pair: Pair, client: Client) -> None:
        key = f"k-{uuid.uuid4().hex}"
        answers = await pair.race(lambda _: client.turn("keyed", key=key))
        assert {status for status, _ in answers} <= {200, 409}, answers
        status, _ = await client.turn("keyed", key=key)  # the client's retry after a 409: a replay
        assert status == 200
        assert not await audit(client)

    await pair.rounds(one)


async def test_two_background_accepts_with_one_key_run_once(pair: Pair) -> None:
    async def one(pair: Pair, client: Client) -> None:
        key = f"k-{uuid.uuid4().hex}"

        async def accept(_: str) -> tuple[int, Any]:
            response = await pair.host.request(
                "POST",
                f"/api/threads/{client.thread}/runs",
                json_body={"messages": "bg"},
                headers={**ASYNC, "Idempotency-Key": key},
            )
            return response.status, await response.json()

        answers = await pair.race(accept)
        assert [status for status, _ in answers] == [202, 202], answers
        run_ids = {body["run_id"] for _, body in answers}
        assert len(run_ids) == 1, answers  # one run, told to both
        client.sent.append("bg")
        client.run_ids |= run_ids
        client.accepted = dict.fromkeys(run_ids, "bg")
        await client.settle_runs(pair.runner)
        assert not await audit(client)

    await pair.rounds(one)


async def test_two_background_turns_both_run_in_order(pair: Pair) -> None:
    async def one(pair: Pair, client: Client) -> None:
        statuses = await pair.race(lambda name: client.accept(f"bg-{name}"))
        assert statuses == [202, 202]
        await drain(pair.runner)
        await client.settle_runs(pair.runner)
        assert not await audit(client)

    await pair.rounds(one)


async def test_two_forks_of_one_checkpoint(pair: Pair) -> None:
    """Both forks start from the same checkpoint; the head's lineage is "one" then one fork
    (a fork replaces the lineage, so "two" and the other fork are not in it)."""

    async def one(pair: Pair, client: Client) -> None:
        _, first = await client.turn("one")
        await client.turn("two")
        answers = await pair.race(lambda name: client.turn(f"fork-{name}", from_checkpoint_id=first["checkpoint_id"]))
        assert sorted(status for status, _ in answers) in ([200, 200], [200, 409]), answers
        head = await (await pair.host.request("GET", f"/api/threads/{client.thread}")).json()
        winner = next(t for t in client.told if t.checkpoint_id == head["checkpoint_id"])
        assert winner.text.startswith("fork-")
        client.told = [t for t in client.told if t.text in ("one", winner.text)]
        assert not await audit(client)

    await pair.rounds(one)


async def test_two_metadata_puts_without_if_match_both_apply(pair: Pair) -> None:
    async def one(pair: Pair, client: Client) -> None:
        async def put(name: str) -> int:
            return await client.put_metadata({"by": name}, tries=1)

        assert await pair.race(put) == [200, 200]
        stored = await (await pair.host.request("GET", f"/api/threads/{client.thread}")).json()
        assert stored["metadata"] in ({"by": "a"}, {"by": "b"})

    await pair.rounds(one)


async def test_history_read_while_the_twin_turns(pair: Pair) -> None:
    async def one(pair: Pair, client: Client) -> None:
        await client.turn("seed")

        async def op(name: str) -> Any:
            if name == "a":
                response = await pair.host.request("GET", f"/api/threads/{client.thread}/history")
                return response.status, await response.json()
            return await client.turn("during")

        (status, page), (turned, _) = await pair.race(op)
        assert (status, turned) == (200, 200)
        assert 1 <= len(page["checkpoints"]) <= 2
        assert not await audit(client)

    await pair.rounds(one)


async def test_two_deletes_at_once_leave_nothing(pair: Pair) -> None:
    async def one(pair: Pair, client: Client) -> None:
        await client.keyed_turn("seed")
        await client.accept("bg")
        await client.settle_runs(pair.runner)
        await client.put_metadata({"channel": "c"})

        async def delete(_: str) -> int:
            return (await pair.host.request("DELETE", f"/api/threads/{client.thread}")).status

        statuses = await pair.race(delete)
        assert 204 in statuses and set(statuses) <= {204, 404}, statuses
        client.deleted = True
        assert not await audit(client)

    await pair.rounds(one)


async def test_a_turn_racing_the_twins_delete_leaves_nothing_once_deleted(pair: Pair) -> None:
    async def one(pair: Pair, client: Client) -> None:
        await client.turn("seed")

        async def op(name: str) -> Any:
            if name == "a":
                return (await pair.host.request("DELETE", f"/api/threads/{client.thread}")).status
            return (await client.turn("racing"))[0]

        deleted, turned = await pair.race(op)
        assert deleted == 204 and turned in (200, 404, 409, 410), (deleted, turned)
        client.deleted = turned != 200 or await _gone(pair, client)
        assert not await audit(client)

    await pair.rounds(one)


async def _gone(pair: Pair, client: Client) -> bool:
    """Whether the thread is gone now (a turn that won before the DELETE is deleted with it)."""
    return (await pair.host.request("GET", f"/api/threads/{client.thread}")).status in (404, 410)
