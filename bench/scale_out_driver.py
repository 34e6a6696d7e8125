"""The scale-out drill's client: many threads, a few turns each, every request to a random instance.

It behaves as an honest client would: it retries what the API says to retry (503 with
``Retry-After``, 409 ``thread_busy`` and ``request_in_progress``), resolves a 500
``outcome_unknown`` by looking for the named checkpoint in the thread's history, and resends
a keyed request with its key. On purpose it also resends keyed requests that already
succeeded, to another instance or at the same time as the first, and requires the same
answer byte for byte; it deletes a few threads mid-way (right after a background turn's 202,
while that run may be queued or running) and never touches them again. Each thread's turns
go one after another: a synchronous turn waits for the background turns before it, and
background turns accepted back to back keep their order through the thread's pending list.

What it was told is in ``Outcome``; whether storage agrees is ``scale_out_verify``'s job.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from bench.scale_out_plan import ThreadPlan, text

ASYNC = {"Prefer": "respond-async"}
TERMINAL = {"succeeded", "failed", "cancelled"}
TRIES = 12


@dataclass
class Outcome:
    """What the client saw."""

    sync_ms: list[float] = field(default_factory=list)  # first send → told 200
    background_ms: list[float] = field(default_factory=list)  # first accept → seen finished
    applied: int = 0  # turns told applied (200, or a background run seen succeeded)
    statuses: Counter[str] = field(default_factory=Counter)  # "<status> <code>" of every answer
    replays: int = 0  # keyed resends answered with the first answer
    deleted: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # promises broken in what the client saw
    seconds: float = 0.0


class Driver:
    def __init__(self, session: aiohttp.ClientSession, bases: list[str], outcome: Outcome, seed: int) -> None:
        self.session = session
        self.bases = bases
        self.outcome = outcome
        self.rng = random.Random(seed)

    def base(self, other_than: str | None = None) -> str:
        choices = [b for b in self.bases if b != other_than] or self.bases
        return self.rng.choice(choices)

    async def call(
        self, method: str, path: str, *, body: Any = None, headers: dict[str, str] | None = None, base: str = ""
    ) -> tuple[int, bytes, Any]:
        """One request; a connection failure is status 0 (whether it landed is not known)."""
        try:
            async with self.session.request(method, (base or self.base()) + path, json=body, headers=headers) as r:
                raw = await r.read()
        except (aiohttp.ClientError, TimeoutError) as error:
            self.outcome.statuses[f"conn {type(error).__name__}"] += 1
            return 0, b"", None
        data = _json(raw)
        code = (data.get("error") or {}).get("code", "") if isinstance(data, dict) else ""
        self.outcome.statuses[f"{r.status} {code}".strip()] += 1
        return r.status, raw, data

    async def pause(self, attempt: int) -> None:
        await asyncio.sleep(min(0.2 * 2**attempt, 3.0) * (0.5 + self.rng.random()))

    async def applied(self, thread: str, checkpoint_id: str | None) -> bool | None:
        """Is ``checkpoint_id`` in the thread's lineage? None if that cannot be read now."""
        status, _, data = await self.call("GET", f"/threads/{thread}/history?limit=20")
        if status != 200:
            return None
        return any(c.get("checkpoint_id") == checkpoint_id for c in data.get("checkpoints", []))

    async def turns(self, thread: str) -> int | None:
        """The thread's turn count, as its pointer says (None if that cannot be read now)."""
        status, _, data = await self.call("GET", f"/threads/{thread}")
        return int(data["turns"]) if status == 200 else 0 if status == 404 else None

    async def plain_turn(self, thread: str, message: str, index: int) -> bool:
        """An unkeyed synchronous turn (the thread's ``index``-th), resent only when it did not
        apply: as the answer says, or, with no answer, as the thread's turn count says."""
        body = {"messages": message, "multitask": "enqueue"}
        for attempt in range(TRIES):
            status, _, data = await self.call("POST", f"/threads/{thread}/runs", body=body)
            code = _code(data)
            if status == 200:
                return True
            if status == 0:  # the connection failed: it may have applied
                count = None
                for look in range(TRIES):
                    if (count := await self.turns(thread)) is not None:
                        break
                    await self.pause(look)
                if count is not None and count > index:
                    return True
                await self.pause(attempt)
                continue
            if status == 500 and code == "outcome_unknown":
                seen = None
                for look in range(TRIES):
                    seen = await self.applied(thread, data["error"].get("details", {}).get("checkpoint_id"))
                    if seen is not None:
                        break
                    await self.pause(look)
                if seen:
                    return True
            elif not (status == 503 or (status == 409 and code == "thread_busy")):
                self.outcome.problems.append(f"{thread}: {message!r} answered {status} {code}")
                return False
            await self.pause(attempt)
        self.outcome.problems.append(f"{thread}: {message!r} still not applied after {TRIES} tries")
        return False

    async def keyed(self, thread: str, message: str, *, background: bool, retry: str) -> bytes | None:
        """A keyed turn (or accept), then the same key again: after the answer, to another
        instance, or twice at once. Every success must carry the same bytes."""
        key = f"so-{uuid.uuid4().hex}"
        headers = {"Idempotency-Key": key, **(ASYNC if background else {})}
        want = 202 if background else 200
        path, body = f"/threads/{thread}/runs", {"messages": message, "multitask": "enqueue"}

        async def until_done(base: str) -> bytes | None:
            for attempt in range(TRIES):
                status, raw, data = await self.call("POST", path, body=body, headers=headers, base=base)
                if status == want:
                    return raw
                code = _code(data)
                if not (status in (0, 500, 503) or (status == 409 and code in ("request_in_progress", "thread_busy"))):
                    self.outcome.problems.append(f"{thread}: keyed {message!r} answered {status} {code}")
                    return None
                base = self.base()
                await self.pause(attempt)
            self.outcome.problems.append(f"{thread}: keyed {message!r} not done after {TRIES} tries")
            return None

        first_base = self.base()
        if retry == "concurrent":
            answers = list(await asyncio.gather(until_done(first_base), until_done(self.base(first_base))))
        else:
            answers = [await until_done(first_base)]
            answers.append(await until_done(self.base(first_base)) if answers[0] is not None else None)
        got = [a for a in answers if a is not None]
        if len(set(got)) > 1:
            self.outcome.problems.append(f"{thread}: key {key} answered differently: {[a[:200] for a in got]}")
        self.outcome.replays += max(len(got) - 1, 0)
        return got[0] if got else None

    async def accept(self, thread: str, message: str) -> str | None:
        """An unkeyed background turn: its 202's run ID."""
        body = {"messages": message}
        for attempt in range(TRIES):
            status, _, data = await self.call("POST", f"/threads/{thread}/runs", body=body, headers=ASYNC)
            if status == 202:
                return str(data["run_id"])
            code = _code(data)
            if not (status == 503 or (status == 409 and code == "thread_busy")):  # 0: may have landed
                self.outcome.problems.append(f"{thread}: background {message!r} answered {status} {code}")
                return None
            await self.pause(attempt)
        self.outcome.problems.append(f"{thread}: background {message!r} not accepted after {TRIES} tries")
        return None

    async def finish(self, thread: str, runs: list[tuple[str, str, float]]) -> None:
        """Wait for each accepted run to end; a succeeded one is an applied turn."""
        for run_id, message, started in runs:
            status_seen = None
            for attempt in range(TRIES * 4):
                status, _, data = await self.call("GET", f"/runs/{run_id}", headers={"Prefer": "wait=20"})
                if status == 200 and data.get("status") in TERMINAL:
                    status_seen = data["status"]
                    break
                if status != 200:
                    await self.pause(attempt)
            if status_seen == "succeeded":
                self.outcome.applied += 1
                self.outcome.background_ms.append((time.monotonic() - started) * 1000)
            else:
                self.outcome.problems.append(f"{thread}: run {run_id} ({message!r}) ended {status_seen}")
        runs.clear()

    async def delete(self, thread: str) -> None:
        for attempt in range(TRIES * 2):
            status, _, data = await self.call("DELETE", f"/threads/{thread}")
            if status == 204 or (status == 404 and attempt > 0):
                self.outcome.deleted.append(thread)
                return
            if status not in (0, 202, 409, 500, 503):
                break
            await self.pause(min(attempt, 3))
        self.outcome.problems.append(f"{thread}: DELETE did not finish (last {status} {_code(data)})")

    async def thread(self, plan: ThreadPlan) -> None:
        runs: list[tuple[str, str, float]] = []
        for i, turn in enumerate(plan.turns):
            message = text(plan.thread, i)
            if not turn.background and runs:
                await self.finish(plan.thread, runs)
            started = time.monotonic()
            if turn.background:
                if turn.keyed:
                    raw = await self.keyed(plan.thread, message, background=True, retry=turn.retry)
                    run_id = None if raw is None else str(_json(raw)["run_id"])
                else:
                    run_id = await self.accept(plan.thread, message)
                if run_id is not None:
                    runs.append((run_id, message, started))
            else:
                if turn.keyed:
                    done = await self.keyed(plan.thread, message, background=False, retry=turn.retry) is not None
                else:
                    done = await self.plain_turn(plan.thread, message, i)
                if done:
                    self.outcome.applied += 1
                    self.outcome.sync_ms.append((time.monotonic() - started) * 1000)
            if plan.delete_after == i:
                await self.delete(plan.thread)
                return
        await self.finish(plan.thread, runs)


async def drive(bases: list[str], plans: list[ThreadPlan], *, concurrency: int, seed: int) -> Outcome:
    """Every thread's turns, ``concurrency`` threads at a time, each request to a random instance."""
    outcome = Outcome()
    gate = asyncio.Semaphore(concurrency)
    timeout = aiohttp.ClientTimeout(total=180)
    # Idle connections are dropped before uvicorn's 5 s keep-alive ends, so no request is
    # sent on a connection the server is closing (it would fail with no answer).
    connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=2)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        driver = Driver(session, bases, outcome, seed)

        async def one(plan: ThreadPlan) -> None:
            async with gate:
                await driver.thread(plan)

        started = time.monotonic()
        await asyncio.gather(*(one(p) for p in plans))
        outcome.seconds = time.monotonic() - started
    return outcome


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _code(data: Any) -> str:
    return str((data.get("error") or {}).get("code", "")) if isinstance(data, dict) else ""


__all__ = ["Outcome", "drive"]
