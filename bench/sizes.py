"""Sections 3a and 3b: cost against checkpoint size, and checkpoint size against turns."""

from __future__ import annotations

import os
import statistics
from collections.abc import Awaitable, Callable
from typing import Any

from agent_framework import InMemoryCheckpointStorage

import workflows
from bench import synthetic
from bench.harness import KB, Bench, Report, ms, timed, user
from resumable.core.resume import TurnInput, prepare_run


async def size_scaling(bench: Bench, report: Report) -> None:
    rows = []
    codec = bench.store().codec.__class__(max_bytes=64 * 1024 * 1024)
    for size in bench.plan.sizes:
        bench.use(2, size)
        checkpoint = await _fresh_checkpoint()
        data = codec.encode(checkpoint)
        repeats = max(3, bench.plan.iterations // 3)
        encode = [await timed(_sync(codec.encode, checkpoint)) for _ in range(repeats)]
        decode = [await timed(_sync(codec.decode, data)) for _ in range(repeats)]
        base = await bench.base_checkpoint()

        async def resume(base: str = base) -> None:
            await bench.post({"checkpoint_id": base, "messages": "n"})

        call = [await timed(resume) for _ in range(repeats)]
        e_med, d_med, c_med = statistics.median(encode), statistics.median(decode), statistics.median(call)
        rows.append(
            [
                f"{len(data) / KB:.0f} KB",
                ms(e_med),
                ms(d_med),
                f"{1000 * e_med / (len(data) / KB):.1f}",
                f"{1000 * d_med / (len(data) / KB):.1f}",
                ms(c_med),
            ]
        )
        report.series.setdefault("full call, by checkpoint KB", []).append((len(data) / KB, c_med))
    report.table(
        "3a. Encode and decode time against checkpoint size",
        ["checkpoint", "encode p50 ms", "decode p50 ms", "encode µs/KB", "decode µs/KB", "full call p50 ms"],
        rows,
        "Linear means a flat µs/KB column. JSON-native state: no pickles to build or check. The full call "
        "(`POST /api/runs`, 2 supersteps, warm: the checkpoint comes from this instance's cache) writes "
        "the new checkpoint to Azurite.",
    )


async def turn_growth(bench: Bench, report: Report) -> None:
    codec = bench.store().codec
    rows = []
    build = workflows.load_spec("default").build
    sizes = await _conversation_sizes(build, bench.plan.turns, "a forty-character message for each turn", codec)
    rows.append(["default (offline)", len(sizes), f"{sizes[0]:,}", f"{sizes[-1]:,}", _per_turn(sizes)])
    agent_sizes = await _chat_agent_sizes(min(bench.plan.turns, 10), codec)
    if agent_sizes:
        rows.append(
            [
                "chat-agents (fake model)",
                len(agent_sizes),
                f"{agent_sizes[0]:,}",
                f"{agent_sizes[-1]:,}",
                _per_turn(agent_sizes),
            ]
        )
    report.table(
        "3b. Checkpoint size against turns in a conversation",
        ["workflow", "turns", "bytes after turn 1", "bytes after last turn", "bytes per turn"],
        rows,
        "Both keep the whole history in the checkpoint, so it grows without bound, linearly in the "
        "conversation's length. Cap it in the workflow (keep the last N turns, or summarize), and "
        "let the lifecycle rule expire old checkpoints.",
    )


def _per_turn(sizes: list[int]) -> str:
    return f"{(sizes[-1] - sizes[0]) / max(1, len(sizes) - 1):,.0f}"


def _sync(fn: Callable[..., Any], *args: Any) -> Callable[[], Awaitable[Any]]:
    async def call() -> Any:
        return fn(*args)

    return call


async def _fresh_checkpoint() -> Any:
    storage = InMemoryCheckpointStorage()
    workflow = synthetic.build_workflow()
    await workflow.run(user("size"), checkpoint_storage=storage)
    return await storage.load(workflow.get_last_checkpoint_id())


async def _conversation_sizes(build: Callable[[], Any], turns: int, text: str, codec: Any) -> list[int]:
    checkpoint, sizes = None, []
    for _ in range(turns):
        run = await prepare_run(build(), checkpoint, TurnInput(messages=user(text)))
        [e async for e in run.events()]
        checkpoint = codec.decode(codec.encode(await run.final_checkpoint()))
        sizes.append(len(codec.encode(checkpoint)))
    return sizes


async def _chat_agent_sizes(turns: int, codec: Any) -> list[int]:
    from devtools.fake_openai import start_fake_openai
    from workflows import chat_agents

    server = await start_fake_openai()
    saved = {k: os.environ.get(k) for k in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL")}
    os.environ.update(OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="bench", OPENAI_MODEL="fake")
    try:
        return await _conversation_sizes(
            chat_agents.build_workflow, turns, "a forty-character message for each turn", codec
        )
    finally:
        for key, value in saved.items():
            os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)
        chat_agents._clients.clear()
        await server.close()
