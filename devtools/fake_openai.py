"""A tiny OpenAI chat-completions server on loopback, for tests with no network.

It speaks enough of the protocol for the real ``openai`` client: JSON responses and
``stream: true`` server-sent chunks ending in ``data: [DONE]``. Replies are
deterministic and say what the model was shown, so a test can check what context
each turn carried. Every request body is recorded.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class FakeOpenAI:
    runner: web.AppRunner
    port: int
    requests: list[dict[str, Any]] = field(default_factory=list)
    # The headers of each request, lower-cased names: what crossed the network boundary.
    headers: list[dict[str, str]] = field(default_factory=list)
    # Streamed replies to a system prompt starting with this word pause after their
    # first chunk until ``release`` is set.
    hold_role: str | None = None
    release: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def close(self) -> None:
        await self.runner.cleanup()


def reply_for(body: dict[str, Any]) -> str:
    """Name the system prompt's first word and every user message the model saw."""
    messages = body.get("messages", [])
    system = next((m["content"] for m in messages if m.get("role") == "system"), "")
    users = [_text(m) for m in messages if m.get("role") == "user"]
    role = system.split()[0] if system else "assistant"
    return f"{role} reply; user said: {' | '.join(users)}"


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)


def _chunk(model: str, delta: dict[str, Any], finish: str | None = None) -> bytes:
    payload = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


async def start_fake_openai() -> FakeOpenAI:
    app = web.Application()
    server: FakeOpenAI | None = None

    async def completions(request: web.Request) -> web.StreamResponse:
        assert server is not None
        body = await request.json()
        server.requests.append(body)
        server.headers.append({k.lower(): v for k, v in request.headers.items()})
        model = body.get("model", "fake-model")
        text = reply_for(body)
        if not body.get("stream"):
            return web.json_response(
                {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                    ],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
                }
            )
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        words = text.split(" ")
        await response.write(_chunk(model, {"role": "assistant", "content": words[0]}))
        if server.hold_role and text.startswith(server.hold_role):
            await asyncio.wait_for(server.release.wait(), timeout=10)
        for word in words[1:]:
            await response.write(_chunk(model, {"content": " " + word}))
        await response.write(_chunk(model, {}, finish="stop"))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    app.router.add_post("/v1/chat/completions", completions)
    # Azure OpenAI's path for the same call (the deployment stands in for the model).
    app.router.add_post("/openai/deployments/{deployment}/chat/completions", completions)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    server = FakeOpenAI(runner=runner, port=port)
    return server
