"""A loopback webhook receiver for the demo and the tests: verifies Standard Webhooks
signatures, records every delivery, and can be told to fail, stop (410) or redirect."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from functions_adapter import signatures
from resumable.errors import InvalidSignature


@dataclass
class Delivery:
    headers: dict[str, str]
    body: bytes
    verified: bool
    answered: int

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class WebhookReceiver:
    """``fail_first`` deliveries get ``fail_status``; after that each gets ``status``
    (or a 302 to ``redirect_to``), with ``reply`` as a JSON body when it is set (an API's
    answer, for a receiver that plays one)."""

    secret: str
    fail_first: int = 0
    fail_status: int = 500
    status: int = 200
    redirect_to: str | None = None
    reply: Any = None
    deliveries: list[Delivery] = field(default_factory=list)
    _runner: web.AppRunner | None = None
    url: str = ""

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        headers = {k.lower(): v for k, v in request.headers.items()}
        try:
            signatures.verify(headers, body, [self.secret], tolerance_seconds=300)
            verified = True
        except InvalidSignature:
            verified = False
        if len(self.deliveries) < self.fail_first:
            answer = self.fail_status
        elif self.redirect_to is not None:
            answer = 302
        else:
            answer = self.status
        self.deliveries.append(Delivery(headers, body, verified, answer))
        if answer == 302:
            raise web.HTTPFound(str(self.redirect_to))
        if self.reply is not None:
            return web.json_response(self.reply, status=answer)
        return web.Response(status=answer, text="ok" if answer < 300 else "no")

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}/hooks/run-finished"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
